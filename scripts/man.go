//go:build man

// man writes meshctl's man pages into a directory, with cobra's doc package:
// meshctl(1) and a page per command, each with its Examples and EXIT
// STATUS, and meshctl-mesh-file(5), the file format. scripts/man runs it:
//
//	go run -tags man scripts/man.go DIR
//
// The pages are dated from SOURCE_DATE_EPOCH when it is set (cobra reads
// it), so a release build makes the same pages every time.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: go run -tags man scripts/man.go DIR")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "man:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	root := cli.Command(io.Discard)
	root.DisableAutoGenTag = true
	var topic *cobra.Command
	walk(root, func(c *cobra.Command) {
		if c.Name() == "mesh-file" {
			topic = c
		}
		// The help text is laid out already: keep it as it is (an indented
		// block is preformatted), and add EXIT STATUS as a section of its own.
		long := c.Long
		if long == "" {
			long = c.Short
		}
		c.Long = indent(long)
		if s := cli.ExitStatus(c); s != "" {
			c.Long += "\n\n# EXIT STATUS\n\n" + indent(s)
		}
	})
	header := &doc.GenManHeader{Title: "MESHCTL", Section: "1", Source: "meshctl", Manual: "meshctl manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return err
	}
	if topic == nil {
		return fmt.Errorf("no mesh-file help topic")
	}
	f, err := os.Create(filepath.Join(dir, "meshctl-mesh-file.5"))
	if err != nil {
		return err
	}
	topic.Use = "meshctl-mesh-file"
	err = doc.GenMan(topic, &doc.GenManHeader{Title: "MESHCTL-MESH-FILE", Section: "5", Source: "meshctl", Manual: "meshctl manual"}, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// indent makes text a preformatted block for the man page's markdown.
func indent(text string) string {
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "    " + l
	}
	return strings.Join(lines, "\n")
}
