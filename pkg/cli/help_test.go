package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/spf13/cobra"
)

// TestEveryCommandHasHelp walks the command tree: every command a user can
// run (groups and cobra's completion and help commands included; hidden
// commands and help topics aside) has a description, Examples and an EXIT
// STATUS section, and its --help prints them.
func TestEveryCommandHasHelp(t *testing.T) {
	root := Command(io.Discard)
	n := 0
	walk(root, func(c *cobra.Command) {
		if c.Hidden || c.IsAdditionalHelpTopicCommand() {
			return
		}
		n++
		path := c.CommandPath()
		if c.Short == "" {
			t.Errorf("%s: no description (Short)", path)
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%s: no Example", path)
		}
		if strings.TrimSpace(ExitStatus(c)) == "" {
			t.Errorf("%s: no EXIT STATUS (Annotations[exitStatusKey] in its own file)", path)
		}
		args := append(strings.Fields(strings.TrimPrefix(path, "meshctl")), "--help")
		var out bytes.Buffer
		env := NewEnv(strings.NewReader(""), &out, &out)
		if code := Run(context.Background(), env, args); code != 0 {
			t.Errorf("meshctl %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
			return
		}
		help := out.String()
		for _, want := range []string{"\nExamples:\n  ", "\nEXIT STATUS:\n  "} {
			if !strings.Contains(help, want) {
				t.Errorf("meshctl %s has no %q section:\n%s", strings.Join(args, " "), strings.TrimSpace(want), help)
			}
		}
	})
	if n < 15 {
		t.Fatalf("walked %d commands; the tree is not what it seems", n)
	}
}

// TestExamplesNameRealCommands checks that each example line that runs
// meshctl names a command and flags that exist: an example that rotted
// (a renamed flag) fails here.
func TestExamplesNameRealCommands(t *testing.T) {
	root := Command(io.Discard)
	call := regexp.MustCompile(`meshctl((?: +[-a-z0-9]+)*)((?: +-[-a-z]+)*)`)
	walk(root, func(c *cobra.Command) {
		for _, line := range strings.Split(c.Example, "\n") {
			for _, m := range call.FindAllStringSubmatch(line, -1) {
				words := strings.Fields(m[0])[1:]
				var cmdWords, flags []string
				for _, w := range words {
					if strings.HasPrefix(w, "-") {
						flags = append(flags, w)
					} else if len(flags) == 0 {
						cmdWords = append(cmdWords, w)
					}
				}
				target, _, err := root.Find(cmdWords)
				if err != nil {
					t.Errorf("%s: example %q: %v", c.CommandPath(), line, err)
					continue
				}
				for _, f := range flags {
					name := strings.TrimLeft(f, "-")
					var known bool
					switch {
					case name == "" || name == "help" || name == "version":
						known = true
					case strings.HasPrefix(f, "--"):
						known = target.Flags().Lookup(name) != nil || target.InheritedFlags().Lookup(name) != nil
					default:
						known = target.Flags().ShorthandLookup(name) != nil || target.InheritedFlags().ShorthandLookup(name) != nil
					}
					if !known {
						t.Errorf("%s: example %q: %s has no flag %s", c.CommandPath(), line, target.CommandPath(), f)
					}
				}
			}
		}
	})
}

// TestMeshFileTopicNamesEveryField checks that "meshctl help mesh-file"
// names every field the decoder accepts.
func TestMeshFileTopicNamesEveryField(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[mesh.Container](), reflect.TypeFor[mesh.Step](), reflect.TypeFor[mesh.Change](), reflect.TypeFor[mesh.RunStep](),
		reflect.TypeFor[mesh.Healthcheck](), reflect.TypeFor[mesh.Logging](), reflect.TypeFor[mesh.FileMount](), reflect.TypeFor[mesh.Network]()} {
		for _, name := range yamlFields(typ) {
			if !regexp.MustCompile(`(?m)^ +` + regexp.QuoteMeta(name) + ` `).MatchString(meshFileHelp) {
				t.Errorf("help mesh-file does not name %s's field %q", typ.Name(), name)
			}
		}
	}
	var out bytes.Buffer
	if code := Run(context.Background(), NewEnv(strings.NewReader(""), &out, &out), []string{"help", "mesh-file"}); code != 0 {
		t.Fatalf("meshctl help mesh-file: exit %d: %s", code, out.String())
	}
	if !strings.Contains(out.String(), "while-stopped") {
		t.Fatalf("meshctl help mesh-file printed:\n%s", out.String())
	}
}

// yamlFields are the YAML names of a struct's fields, those of its inline
// structs included.
func yamlFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case strings.Contains(opts, "inline") && f.Type.Kind() == reflect.Struct:
			out = append(out, yamlFields(f.Type)...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	return out
}

// TestVersionOf: a release's -ldflags win; else a go build from a git
// checkout shows its commit, time and whether the tree was modified.
func TestVersionOf(t *testing.T) {
	vcs := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-30T12:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		name                  string
		bi                    *debug.BuildInfo
		version, commit, date string
		want                  string
	}{
		{"checkout", vcs, "", "", "", "meshctl (devel) (commit 0123456789abcdef0123456789abcdef01234567+dirty, built 2026-11-30T12:00:00Z, "},
		{"release", vcs, "1.2.0", "fedcba", "2026-12-01T00:00:00Z", "meshctl 1.2.0 (commit fedcba, built 2026-12-01T00:00:00Z, "},
		{"no info", nil, "", "", "", "meshctl (devel) (commit unknown, built unknown, "},
	} {
		got := versionOf(tc.bi, tc.version, tc.commit, tc.date).String()
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: got %q, want %q…", tc.name, got, tc.want)
		}
	}
}

// TestVersionFromCheckout builds meshctl from this git checkout, as the
// README says to, and checks that "meshctl version" and "meshctl
// --version" name the checkout's commit.
func TestVersionFromCheckout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds meshctl")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	head, err := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout, or no git: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "meshctl")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/meshctl")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	want := "(commit " + strings.TrimSpace(string(head))
	for _, args := range [][]string{{"version"}, {"--version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("meshctl %s: %v", args[0], err)
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("meshctl %s printed %q, want it to contain %q", args[0], out, want)
		}
	}
	_ = os.Remove(bin)
}

// TestHelpTopicTypo: a mistyped help topic is exit 2 naming the topic it
// looks like; a word that is no topic's is an unknown command.
func TestHelpTopicTypo(t *testing.T) {
	for word, want := range map[string]string{
		"mesh-fiel":  `unknown help topic "mesh-fiel"; did you mean "mesh-file"?`,
		"exit":       `unknown help topic "exit"; did you mean "exit-codes"?`,
		"exti-codes": `unknown help topic "exti-codes"; did you mean "exit-codes"?`,
		"zzz":        `unknown command "zzz"`,
	} {
		var out, errOut bytes.Buffer
		code := Run(context.Background(), NewEnv(strings.NewReader(""), &out, &errOut), []string{"help", word})
		if code != exitUsage || !strings.Contains(errOut.String(), want) || out.Len() > 0 {
			t.Errorf("help %s: exit %d, stdout %q, stderr %q; want exit 2 and %s", word, code, out.String(), errOut.String(), want)
		}
	}
}

// walk calls fn for c and each command under it.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// TestHelpTopicsListed: meshctl's help lists its topics in the form that
// reads them, "meshctl help TOPIC", with a gap before the description
// (not "meshctl exit-codes The exit status…").
func TestHelpTopicsListed(t *testing.T) {
	var out strings.Builder
	root := Command(&out)
	root.SetArgs([]string{"help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`(?m)^  meshctl help exit-codes {2,}The exit status of every meshctl command$`,
		`(?m)^  meshctl help mesh-file {2,}The mesh file`,
	} {
		if !regexp.MustCompile(want).MatchString(out.String()) {
			t.Errorf("no line %s in:\n%s", want, out.String())
		}
	}
}
