package cli

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestMainAsMeshctl is not a test: it is meshctl, run by
// TestClosedOutput as a process of its own (the helper-process pattern), so
// that the kernel's SIGPIPE reaches a real process.
func TestMainAsMeshctl(t *testing.T) {
	if os.Getenv("MESHCTL_TEST_AS_MESHCTL") != "1" {
		t.Skip("run by TestClosedOutput")
	}
	os.Args = append([]string{"meshctl"}, flag.Args()...) // the words after "--"
	os.Exit(Main())
}

// meshctlWithClosedOutput runs meshctl args in a process whose stdout and
// stderr are pipes nobody reads any more, as with "meshctl … | head -1" or a
// log shipper that died, and returns how it ended.
func meshctlWithClosedOutput(t *testing.T, args ...string) *os.ProcessState {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestMainAsMeshctl$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "MESHCTL_TEST_AS_MESHCTL=1")
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	// The readers are gone before meshctl writes its first byte.
	outR.Close()
	errR.Close()
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Run()
	outW.Close()
	errW.Close()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState
}

// TestClosedOutput: a closed stdout and stderr neither kill meshctl (SIGPIPE)
// nor fail its work: the build is requested, and the exit status is 0.
func TestClosedOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("runs processes")
	}
	for _, tt := range []struct {
		name string
		args []string
		// done checks, in-process, that the work was done.
		done func(t *testing.T, dir string)
	}{
		{"build request", []string{"build", "request", "app", "web"}, func(t *testing.T, dir string) {
			code, out, _ := runMeshctl(t, dir, "build", "list")
			if code != 0 || !strings.Contains(out, "app") || !strings.Contains(out, "web") {
				t.Errorf("build list after a request with its output closed: exit %d\n%s", code, out)
			}
		}},
		{"build request -o json", []string{"build", "request", "app", "-o", "json"}, func(t *testing.T, dir string) {
			code, out, _ := runMeshctl(t, dir, "build", "list")
			if code != 0 || !strings.Contains(out, "app") {
				t.Errorf("build list after a request with its output closed: exit %d\n%s", code, out)
			}
		}},
		{"version", []string{"version"}, nil},
		{"help", []string{"--help"}, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			ps := meshctlWithClosedOutput(t, append([]string{"--state-dir", dir}, tt.args...)...)
			ws := ps.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				t.Fatalf("meshctl %s was killed by %v", strings.Join(tt.args, " "), ws.Signal())
			}
			if ps.ExitCode() != 0 {
				t.Errorf("meshctl %s: exit %d, want 0: its work was done", strings.Join(tt.args, " "), ps.ExitCode())
			}
			if tt.done != nil {
				tt.done(t, dir)
			}
		})
	}
}

// TestClosedOutputApply: an apply whose output nobody reads converges the
// host all the same, records it, and exits 0.
func TestClosedOutputApply(t *testing.T) {
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" || testing.Short() {
		t.Skip("MESHCTL_TEST_DOCKER_HOST is not set")
	}
	dir := filepath.Join(t.TempDir(), "state")
	mesh := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(mesh, []byte("modules:\n  sigp:\n    containers:\n      app: {image: meshtest/busybox:1, command: [sh, -c, 'trap \"exit 0\" TERM; sleep 600 & wait'], network: none}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	if err := os.WriteFile(empty, []byte("modules:\n  sigp:\n    containers: {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if code, out, errs := runMeshctl(t, dir, "--docker-host", host, "apply", "--prune", "-f", empty); code != 0 {
			t.Logf("cleanup: exit %d\n%s%s", code, out, errs)
		}
	})
	for _, args := range [][]string{{"apply", "-f", mesh}, {"apply", "-f", mesh, "-o", "json"}} {
		ps := meshctlWithClosedOutput(t, append([]string{"--state-dir", dir, "--docker-host", host}, args...)...)
		if ws := ps.Sys().(syscall.WaitStatus); ws.Signaled() {
			t.Fatalf("meshctl %s was killed by %v", strings.Join(args, " "), ws.Signal())
		}
		if ps.ExitCode() != 0 {
			t.Errorf("meshctl %s: exit %d, want 0", strings.Join(args, " "), ps.ExitCode())
		}
	}
	code, out, errs := runMeshctl(t, dir, "--docker-host", host, "apply", "--dry-run", "-f", mesh)
	if code != 0 || !strings.Contains(out, "sigp.app") || !strings.Contains(out, "unchanged") {
		t.Errorf("after the applies: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "applied.json")); err != nil {
		t.Errorf("the apply was not recorded: %v", err)
	}
}

// TestOutputWriterKeepsTheError: a write error is kept for Main and never
// returned to the command, and later writes are dropped.
func TestOutputWriterKeepsTheError(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	o := &outputWriter{w: w}
	for range 3 {
		if n, err := o.Write([]byte("result\n")); n != 7 || err != nil {
			t.Fatalf("Write = %d, %v; want 7, nil", n, err)
		}
	}
	w.Close()
	if !errors.Is(o.Err(), syscall.EPIPE) {
		t.Errorf("Err() = %v, want EPIPE", o.Err())
	}
}
