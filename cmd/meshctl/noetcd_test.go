package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/internal/etcdtest"
)

// TestReleaseMeshctlHandsEtcdOver builds meshctl as the release does,
// without the etcd client (-tags noetcd), and checks that it has none and
// that a command given an etcd ledger is carried out by meshctl-etcd beside
// it: what that meshctl cannot do alone. Without meshctl-etcd it says how to
// get it, and a command that reads no ledger still runs.
func TestReleaseMeshctlHandsEtcdOver(t *testing.T) {
	dir := t.TempDir()
	lite := filepath.Join(dir, "meshctl")
	if out, err := exec.Command("go", "build", "-tags", "noetcd", "-o", lite, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags noetcd: %v\n%s", err, out)
	}
	mods, err := exec.Command("go", "version", "-m", lite).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	for _, m := range []string{"go.etcd.io/etcd/client/v3", "google.golang.org/grpc", "google.golang.org/protobuf"} {
		if bytes.Contains(mods, []byte("\tdep\t"+m+"\t")) {
			t.Errorf("meshctl built with -tags noetcd links %s", m)
		}
	}

	state := filepath.Join(dir, "state")
	// A ledger never contacted until meshctl-etcd is there.
	env := []string{"PATH=" + filepath.Join(dir, "no-bin"), "HOME=" + dir,
		"MESHCTL_LEDGER=etcd://127.0.0.1:1/unused", "MESHCTL_STATE_DIR=" + state}
	run := func(want int, args ...string) string {
		t.Helper()
		c := exec.Command(lite, args...)
		c.Env = env
		var stdout, stderr bytes.Buffer
		c.Stdout, c.Stderr = &stdout, &stderr
		err := c.Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("meshctl %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, want, &stdout, &stderr)
		}
		return stdout.String() + stderr.String()
	}

	out := run(1, "build", "current", "web")
	if want := "meshctl-etcd is needed for this command and is neither beside meshctl (" + dir + ") nor on PATH"; !strings.Contains(out, want) {
		t.Errorf("without meshctl-etcd: %q, want it to say %q", out, want)
	}
	if want := "go build -o " + filepath.Join(dir, "meshctl-etcd") + " ./cmd/meshctl"; !strings.Contains(out, want) {
		t.Errorf("without meshctl-etcd: %q, want it to say %q", out, want)
	}
	run(0, "version") // reads no ledger: no meshctl-etcd needed

	eps := etcdtest.Endpoints(t)
	env[2] = "MESHCTL_LEDGER=etcd://" + eps + etcdtest.Prefix(t.Name())
	// meshctl-etcd is this test binary under that name (TestMain).
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, filepath.Join(dir, "meshctl-etcd")); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(run(0, "-q", "build", "request", "web", "--new"))
	if !strings.HasPrefix(id, "b-") {
		t.Fatalf("build request printed %q, want a build id", id)
	}
	run(0, "build", "record", id, "--image", "meshtest/web:1")
	if got := strings.TrimSpace(run(0, "build", "current", "web")); got != "meshtest/web:1" {
		t.Errorf("build current web = %q, want meshtest/web:1", got)
	}
	// A completion that reads the ledger is handed over too.
	pending := strings.TrimSpace(run(0, "-q", "build", "request", "web"))
	if got := run(0, "__complete", "build", "record", ""); !strings.Contains(got, pending+"\tweb, requested") {
		t.Errorf("completion of build record: %q, want the pending build %s", got, pending)
	}
}
