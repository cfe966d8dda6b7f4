package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestGoreleaserConfig reads .goreleaser.yaml (goreleaser itself is too slow
// for every test run: scripts/release-check runs "goreleaser check"): the
// version variables its -ldflags set exist here, and each archive ships
// what the before hooks make, the man pages and the completions.
func TestGoreleaserConfig(t *testing.T) {
	repo := filepath.Join("..", "..")
	b, err := os.ReadFile(filepath.Join(repo, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type build struct {
		ID      string   `yaml:"id"`
		Main    string   `yaml:"main"`
		Ldflags []string `yaml:"ldflags"`
	}
	var cfg struct {
		Version int `yaml:"version"`
		Before  struct {
			Hooks []string `yaml:"hooks"`
		} `yaml:"before"`
		Builds   []build `yaml:"builds"`
		Archives []struct {
			IDs   []string `yaml:"ids"`
			Files []any    `yaml:"files"`
		} `yaml:"archives"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf(".goreleaser.yaml: %v", err)
	}
	if cfg.Version != 2 || len(cfg.Builds) == 0 || len(cfg.Archives) == 0 {
		t.Fatalf(".goreleaser.yaml: want version 2 with builds and archives, got %+v", cfg)
	}

	// The variables -X sets must be the ones version.go reads.
	_ = []*string{&version, &commit, &date}
	x := regexp.MustCompile(`-X github\.com/meshctl/meshctl/pkg/cli\.(\w+)=`)
	var set []string
	for _, f := range cfg.Builds[0].Ldflags {
		for _, m := range x.FindAllStringSubmatch(f, -1) {
			set = append(set, m[1])
		}
	}
	slices.Sort(set)
	if want := []string{"commit", "date", "version"}; !slices.Equal(set, want) {
		t.Errorf("ldflags set pkg/cli.%v, want %v", set, want)
	}
	if cfg.Builds[0].Main != "./cmd/meshctl" {
		t.Errorf("builds main = %q", cfg.Builds[0].Main)
	}
	// Every program under cmd/ is built, with the same version flags, and
	// shipped in the same archive: meshctl runs meshctl-convert from beside
	// itself.
	cmds, _ := filepath.Glob(filepath.Join(repo, "cmd", "*"))
	for _, dir := range cmds {
		main := "./cmd/" + filepath.Base(dir)
		i := slices.IndexFunc(cfg.Builds, func(b build) bool { return b.Main == main })
		if i < 0 {
			t.Errorf("no build of %s", main)
			continue
		}
		if !slices.Equal(cfg.Builds[i].Ldflags, cfg.Builds[0].Ldflags) {
			t.Errorf("%s is built with ldflags %v, meshctl with %v", main, cfg.Builds[i].Ldflags, cfg.Builds[0].Ldflags)
		}
		if !slices.Contains(cfg.Archives[0].IDs, cfg.Builds[i].ID) {
			t.Errorf("the archive (ids %v) does not ship build %q (%s)", cfg.Archives[0].IDs, cfg.Builds[i].ID, main)
		}
	}

	hooks := strings.Join(cfg.Before.Hooks, "\n")
	for _, want := range []string{"scripts/man .release/man", "completion bash > .release/completions/", "completion zsh > .release/completions/"} {
		if !strings.Contains(hooks, want) {
			t.Errorf("before hooks do not run %q:\n%s", want, hooks)
		}
	}
	if fi, err := os.Stat(filepath.Join(repo, "scripts", "man")); err != nil || fi.Mode()&0o111 == 0 {
		t.Errorf("scripts/man is missing or not executable: %v", err)
	}
	files, _ := yaml.Marshal(cfg.Archives[0].Files)
	for _, want := range []string{".release/man/*", ".release/completions/*", "LICENSE", "README.md"} {
		if !strings.Contains(string(files), want) {
			t.Errorf("archives do not ship %s:\n%s", want, files)
		}
	}
}
