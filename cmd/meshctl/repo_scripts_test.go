package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRepoScripts is the cheap guard over the project's bash scripts: each
// parses (bash -n) and is executable, and CI's entry point runs the tests
// and then the demo (.ci/run), which runs them for real.
func TestRepoScripts(t *testing.T) {
	repo := filepath.Join("..", "..")
	scripts, _ := filepath.Glob(filepath.Join(repo, "scripts", "*"))
	scripts = append(scripts, filepath.Join(repo, ".ci", "run"), filepath.Join(repo, "examples", "store", "build-web"))
	n := 0
	for _, p := range scripts {
		b, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(b), "#!/usr/bin/env bash\n") {
			continue // a directory, lib.sh (sourced), a Go file
		}
		n++
		fi, _ := os.Stat(p)
		if fi.Mode()&0o111 == 0 {
			t.Errorf("%s is not executable", p)
		}
		if !strings.Contains(string(b), "\nset -euo pipefail\n") {
			t.Errorf("%s: no set -euo pipefail", p)
		}
		if out, err := exec.Command("bash", "-n", p).CombinedOutput(); err != nil {
			t.Errorf("bash -n %s: %v\n%s", p, err, out)
		}
	}
	if n < 6 {
		t.Fatalf("found %d bash scripts; want scripts/demo, test, man, release-check, engine.sh, images.sh…", n)
	}
	ci, err := os.ReadFile(filepath.Join(repo, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?s)\nscripts/test "\$@"\n(.*\n)?scripts/demo\n`).Match(ci) {
		t.Errorf(".ci/run must run scripts/test, then scripts/demo:\n%s", ci)
	}
}
