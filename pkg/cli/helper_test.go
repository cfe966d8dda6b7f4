package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConvertWithoutItsHelper: meshctl convert runs meshctl-convert; where
// it is neither beside meshctl nor on PATH, that is exit 1 saying how to
// get it, and nothing on stdout.
func TestConvertWithoutItsHelper(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), NewEnv(strings.NewReader(""), &stdout, &stderr), []string{"convert"})
	if code != exitFailed {
		t.Errorf("exit %d, want %d; stderr: %s", code, exitFailed, stderr.String())
	}
	if !strings.Contains(stderr.String(), "meshctl-convert is needed for this command") ||
		!strings.Contains(stderr.String(), "go build -o ") {
		t.Errorf("stderr does not say what is missing and how to get it: %s", stderr.String())
	}
	if stdout.Len() > 0 {
		t.Errorf("stdout: %q", stdout.String())
	}
}

// TestConvertRunsItsHelper: meshctl convert runs meshctl-convert from PATH
// with the same arguments, on the same stdin and stdout, and exits with its
// status, adding nothing to what it wrote.
func TestConvertRunsItsHelper(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, convertHelper)
	// Shell builtins only: PATH holds the helper alone.
	script := "#!/bin/sh\necho \"args: $*\"\nread -r line; echo \"$line\"\necho oops >&2\nexit 7\n"
	if err := os.WriteFile(helper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), NewEnv(strings.NewReader("from stdin\n"), &stdout, &stderr),
		[]string{"-o", "json", "convert", "-f", "compose.yaml", "--profile", "db"})
	if code != 7 {
		t.Errorf("exit %d, want the helper's 7", code)
	}
	if want := "args: -o json convert -f compose.yaml --profile db\nfrom stdin\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
	if stderr.String() != "oops\n" {
		t.Errorf("stderr %q, want the helper's alone", stderr.String())
	}
}
