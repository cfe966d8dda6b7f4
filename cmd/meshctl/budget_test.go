package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/ledger"
)

// TestEtcdApplyWaitsForASlot: another host holds the only slot of the
// module. The apply of a stop-first change waits --lock-timeout, then exits
// 3 naming that host, its container untouched. Released meanwhile, the
// apply waits for it and goes on.
func TestEtcdApplyWaitsForASlot(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	if os.Getenv("MESHCTL_TEST_DOCKER_HOST") == "" {
		t.Skip("no test engine")
	}
	prefix := etcdtest.Prefix(t.Name())
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	file := func(v string) string {
		p := filepath.Join(dir, v+".yaml")
		src := "modules:\n  h29bslot:\n    max-unavailable: 1\n    containers:\n      app: {image: meshtest/busybox:1, entrypoint: [/bin/sleep], command: [\"3600\"], network: none, stop-signal: SIGKILL, env: {V: \"" + v + "\"}}\n"
		if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meshctl := func(args ...string) (string, int) {
		cmd := exec.Command("meshctl", append([]string{"--state-dir", state, "--host-name", "h1"}, args...)...)
		cmd.Env = append(os.Environ(), "MESHCTL_LEDGER=etcd://"+eps+prefix, "DOCKER_HOST="+os.Getenv("MESHCTL_TEST_DOCKER_HOST"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := meshctl("apply", "--settle", "500ms", "-f", file("1")); code != 0 {
		t.Fatalf("first apply: exit %d\n%s", code, out)
	}
	t.Cleanup(func() { meshctl("apply", "--remove-module", "h29bslot") })
	inspect := func() string {
		out, _ := exec.Command("docker", "-H", os.Getenv("MESHCTL_TEST_DOCKER_HOST"), "inspect", "-f", "{{.Id}} {{.State.Running}}", "h29bslot.app").Output()
		return strings.TrimSpace(string(out))
	}
	before := inspect()

	l, err := ledger.OpenEtcd(ledger.EtcdConfig{Endpoints: strings.Split(eps, ","), Prefix: prefix, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	if b, err := l.TakeSlot(ctx, ledger.Slot{Host: "h9", Module: "h29bslot", Token: "x", PID: 99, TakenAt: time.Now()}, 1); err != nil || !b.Taken {
		t.Fatalf("h9's slot: %+v, %v", b, err)
	}
	out, code := meshctl("--lock-timeout", "2s", "apply", "-f", file("2"))
	if code != 3 || !strings.Contains(out, "held by h9 (pid 99") {
		t.Fatalf("apply under h9's slot: exit %d, want 3 naming h9\n%s", code, out)
	}
	if after := inspect(); after != before {
		t.Errorf("the refused apply changed the container: %s, was %s", after, before)
	}

	go func() {
		time.Sleep(1500 * time.Millisecond)
		_, _ = l.GiveBackSlot(ctx, "h29bslot", "h9", "")
	}()
	start := time.Now()
	out, code = meshctl("--lock-timeout", "30s", "apply", "--settle", "500ms", "-f", file("2"))
	if code != 0 || !strings.Contains(out, "waiting for a slot of module h29bslot (max-unavailable 1): held by h9") {
		t.Fatalf("apply as h9 releases: exit %d\n%s", code, out)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("the apply took %s: it did not wait for the slot", waited)
	}
	if st, _ := l.Mesh(ctx, "h29bslot"); len(st.Slots) != 0 || len(st.Members) != 1 {
		t.Errorf("after: %+v; want h1 a member and no slot", st)
	}
}
