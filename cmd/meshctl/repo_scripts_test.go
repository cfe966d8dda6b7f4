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

// TestEngineHomePerCheckout: two checkouts get two engine homes by default, so
// scripts/engine.sh stop in one never ends the engine of a run in the other
// (two checkouts' test runs side by side); the home is short enough for
// containerd's socket path.
func TestEngineHomePerCheckout(t *testing.T) {
	lib, err := os.ReadFile(filepath.Join("..", "..", "scripts", "lib.sh"))
	if err != nil {
		t.Fatal(err)
	}
	homes := map[string]bool{}
	for _, name := range []string{"a", "b"} {
		top := filepath.Join(t.TempDir(), name)
		if err := os.MkdirAll(filepath.Join(top, "scripts"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(top, "scripts", "lib.sh"), lib, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("bash", "-c", `. scripts/lib.sh && echo "$ENGINE_DIR"`)
		cmd.Dir = top
		cmd.Env = withoutEnv(os.Environ(), "MESHCTL_ENGINE_DIR", "MESHCTL_TEST_DOCKER_HOST")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sourcing lib.sh in %s: %v", top, err)
		}
		home := strings.TrimSpace(string(out))
		if !regexp.MustCompile(`^/tmp/meshctl-engine-[0-9a-f]{8}$`).MatchString(home) {
			t.Errorf("checkout %s: engine home %q, want /tmp/meshctl-engine-XXXXXXXX", top, home)
		}
		homes[home] = true
	}
	if len(homes) != 2 {
		t.Errorf("two checkouts share the engine home %v", homes)
	}
}

// TestEngineStopQuiet: scripts/engine.sh stop walks /proc for leftover shims;
// a process that exits during the walk must not print "No such file or
// directory" (it did on every stop).
func TestEngineStopQuiet(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("scripts/engine.sh stop walks /proc only as root")
	}
	home, err := os.MkdirTemp("/tmp", "mse-q")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(home)
	// Short-lived processes all through the stop, so that some exit mid-walk.
	churn := exec.Command("bash", "-c", `end=$((SECONDS + 20)); while ((SECONDS < end)); do /bin/true & /bin/true & wait; done`)
	if err := churn.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = churn.Process.Kill(); _ = churn.Wait() }()
	for range 5 {
		cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "engine.sh"), "stop")
		cmd.Env = append(withoutEnv(os.Environ(), "MESHCTL_TEST_DOCKER_HOST"), "MESHCTL_ENGINE_DIR="+home)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("engine.sh stop: %v\n%s", err, out)
		}
		if strings.Contains(string(out), "No such file") {
			t.Fatalf("engine.sh stop printed an error for a process that exited:\n%s", out)
		}
	}
}

// withoutEnv returns env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		keep := true
		for _, n := range names {
			if strings.HasPrefix(kv, n+"=") {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// TestReadmeBuildIsClean: the README builds with `go build -o bin/ ./cmd/...`;
// git must ignore what that writes, or every later build of the checkout
// reads "+dirty" in `meshctl version`.
func TestReadmeBuildIsClean(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "go build -o bin/ ./cmd/...") {
		t.Fatal("README no longer builds into bin/: update this test")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, p := range []string{"bin/meshctl", "bin/meshctl-convert"} {
		cmd := exec.Command("git", "check-ignore", "-q", p)
		cmd.Dir = filepath.Join("..", "..")
		if err := cmd.Run(); err != nil {
			t.Errorf("git does not ignore %s (the README's build output): %v", p, err)
		}
	}
}
