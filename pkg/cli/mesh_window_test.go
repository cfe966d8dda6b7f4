package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
)

// meshHost is one host of a mesh window test: a state directory, a fake
// engine and a host name, driven through pkg/cli against the real etcd.
type meshHost struct {
	name, dir, ledger string
	eng               *enginetest.Fake
}

func meshHosts(t *testing.T, n int) []*meshHost {
	url := "etcd://" + etcdtest.Endpoints(t) + etcdtest.Prefix(t.Name())
	var hosts []*meshHost
	for i := range n {
		hosts = append(hosts, &meshHost{name: fmt.Sprintf("host-%c", 'a'+i), dir: filepath.Join(t.TempDir(), "state"),
			ledger: url, eng: enginetest.NewFake("meshtest/busybox:1")})
	}
	return hosts
}

// run runs meshctl on h, and returns its exit code and its stderr.
func (h *meshHost) run(ctx context.Context, args ...string) (int, string) {
	var out, errOut bytes.Buffer
	env := NewEnv(strings.NewReader(""), &out, &errOut)
	env.NewEngine = func(string) (engine.Client, error) { return h.eng, nil }
	all := append([]string{"--state-dir", h.dir, "--host-name", h.name, "--ledger", h.ledger, "--lock-timeout", "1m"}, args...)
	code := Run(ctx, env, all)
	return code, errOut.String()
}

// meshWindowFile is a module with a mesh: all step that runs script. Its
// step holds app stopped, under max-unavailable 3.
func meshWindowFile(t testing.TB, dir, gather, script string) string {
	return meshWindowFileOf(t, dir, 3, "while-stopped: [app]", gather, script)
}

// meshWindowFileOf is meshWindowFile with a budget and a hold of its own.
func meshWindowFileOf(t testing.TB, dir string, budget int, hold, gather, script string) string {
	doc := fmt.Sprintf(`modules:
  sweep:
    max-unavailable: %d
    containers:
      app: {image: meshtest/busybox:1, command: [sleep, '1000']}
    steps:
      gc:
        mesh: all
        gather: %s
        %s
        exec: [/bin/sh, -c, %q]
`, budget, gather, hold, script)
	f := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// applyAll applies file on every host, in turn.
func applyAll(t *testing.T, hosts []*meshHost, file string) {
	t.Helper()
	for _, h := range hosts {
		if code, errOut := h.run(context.Background(), "apply", "-f", file, "--settle", "0s"); code != 0 {
			t.Fatalf("%s: apply exit %d: %s", h.name, code, errOut)
		}
	}
}

// runAll runs meshctl with args on every host at once. Once wait returned,
// codes and errs hold each host's exit code and stderr.
func runAll(ctx context.Context, hosts []*meshHost, args ...string) (codes []int, errs []string, wait func()) {
	var wg sync.WaitGroup
	codes, errs = make([]int, len(hosts)), make([]string, len(hosts))
	for i, h := range hosts {
		wg.Go(func() { codes[i], errs[i] = h.run(ctx, args...) })
	}
	return codes, errs, wg.Wait
}

func waitFile(t *testing.T, path string, within time.Duration) {
	t.Helper()
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s did not appear within %s", path, within)
}

// TestMeshWindowHoldsEveryHost: three hosts run the same mesh: all window
// at once. The step runs once, while every host's container is stopped.
// Then all come back, and every window exits 0.
func TestMeshWindowHoldsEveryHost(t *testing.T) {
	hosts := meshHosts(t, 3)
	dir := t.TempDir()
	file := meshWindowFile(t, dir, "1m", fmt.Sprintf("echo ran >>%[1]s/runs; touch %[1]s/started; while [ ! -e %[1]s/go ]; do sleep 0.02; done", dir))
	ctx := context.Background()
	applyAll(t, hosts, file)
	codes, errs, wait := runAll(ctx, hosts, "window", "run", "sweep", "gc", "--settle", "0s")
	waitFile(t, filepath.Join(dir, "started"), time.Minute)
	for _, h := range hosts {
		if c, ok := h.eng.Get("sweep.app"); !ok || c.Running {
			t.Errorf("%s: sweep.app runs while the step runs (found %v)", h.name, ok)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wait()
	for i, h := range hosts {
		if codes[i] != 0 {
			t.Errorf("%s: window exit %d: %s", h.name, codes[i], errs[i])
		}
		if c, ok := h.eng.Get("sweep.app"); !ok || !c.Running {
			t.Errorf("%s: sweep.app does not run after the window", h.name)
		}
	}
	runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
	if got := strings.Count(string(runs), "ran"); got != 1 {
		t.Errorf("the step ran %d times, want once", got)
	}
	// Every host's window logs names the mesh window and its runner, and
	// shows its hosts as etcd has them: each one back.
	for _, h := range hosts {
		code, errOut := h.run(ctx, "window", "logs")
		if code != 0 || !strings.Contains(errOut, "was part of mesh window g") || !strings.Contains(errOut, "its step ran on host host-") ||
			!strings.Contains(errOut, "MESH WINDOW") || !strings.Contains(errOut, "ended") {
			t.Errorf("%s: window logs: exit %d, want 0 naming the mesh window, its runner and its end:\n%s", h.name, code, errOut)
		}
	}
}

// TestMeshWindowHostAbsent: host-c runs the module but never joins. The
// others hold nothing, the step never runs, and each exits 1 naming it.
func TestMeshWindowHostAbsent(t *testing.T) {
	hosts := meshHosts(t, 3)
	dir := t.TempDir()
	file := meshWindowFile(t, dir, "2s", fmt.Sprintf("echo ran >>%s/runs", dir))
	ctx := context.Background()
	for _, h := range hosts {
		if code, errOut := h.run(ctx, "apply", "-f", file, "--settle", "0s"); code != 0 {
			t.Fatalf("%s: apply exit %d: %s", h.name, code, errOut)
		}
		h.eng.Changes() // what the apply did
	}
	codes, errs, wait := runAll(ctx, hosts[:2], "window", "run", "sweep", "gc")
	wait()
	for i, h := range hosts[:2] {
		if codes[i] != 1 || !strings.Contains(errs[i], "host-c did not join by the deadline") {
			t.Errorf("%s: exit %d, want 1 naming host-c: %s", h.name, codes[i], errs[i])
		}
		if ch := h.eng.Changes(); len(ch) > 0 {
			t.Errorf("%s: the engine was changed: %v", h.name, ch)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "runs")); err == nil {
		t.Error("the step ran")
	}
}

// TestMeshWindowStepFails: the step fails on its runner. Every host brings
// its container back, and every window exits 1 with the step's result.
func TestMeshWindowStepFails(t *testing.T) {
	hosts := meshHosts(t, 2)
	dir := t.TempDir()
	file := meshWindowFile(t, dir, "1m", "exit 7")
	ctx := context.Background()
	applyAll(t, hosts, file)
	codes, errs, wait := runAll(ctx, hosts, "window", "run", "sweep", "gc", "--settle", "0s")
	wait()
	for i, h := range hosts {
		if codes[i] != 1 || !strings.Contains(errs[i], "exit") || !strings.Contains(errs[i], "7") {
			t.Errorf("%s: exit %d, want 1 with the step's exit 7: %s", h.name, codes[i], errs[i])
		}
		if c, ok := h.eng.Get("sweep.app"); !ok || !c.Running {
			t.Errorf("%s: sweep.app does not run after the window", h.name)
		}
	}
}

// TestMeshWindowNeedsEtcd: without an etcd ledger, a mesh: all step is
// refused before anything is held (exit 2).
func TestMeshWindowNeedsEtcd(t *testing.T) {
	h := &meshHost{name: "host-a", dir: filepath.Join(t.TempDir(), "state"), eng: enginetest.NewFake("meshtest/busybox:1")}
	dir := t.TempDir()
	file := meshWindowFile(t, dir, "1m", "true")
	h.eng.Changes()
	var out, errOut bytes.Buffer
	env := NewEnv(strings.NewReader(""), &out, &errOut)
	env.NewEngine = func(string) (engine.Client, error) { return h.eng, nil }
	code := Run(context.Background(), env, []string{"--state-dir", h.dir, "window", "run", "sweep", "gc", "-f", file})
	if code != 2 || !strings.Contains(errOut.String(), "mesh: all, which needs an etcd ledger") {
		t.Errorf("exit %d, want 2 saying mesh: all needs etcd: %s", code, errOut.String())
	}
	if ch := h.eng.Changes(); len(ch) > 0 {
		t.Errorf("the engine was changed: %v", ch)
	}
}

// TestMeshWindowDryRun: a dry run of a mesh: all step names the hosts
// that must join and says what the join would do: open the gathering,
// join the open one (naming who it waits for), or, on a host that is not
// a member, be refused (exit 2) as the join is. A window of this host only
// on the module is refused while a gathering is open (exit 3).
func TestMeshWindowDryRun(t *testing.T) {
	hosts := meshHosts(t, 2)
	dir := t.TempDir()
	file := meshWindowFile(t, dir, "1m", "true")
	local := filepath.Join(dir, "local.yaml")
	doc, _ := os.ReadFile(file)
	doc = append(doc, []byte("      local:\n        while-stopped: [app]\n        exec: [/bin/true]\n")...)
	if err := os.WriteFile(local, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	applyAll(t, hosts, local)
	hosts[0].eng.Changes()
	dryRun := func(h *meshHost, name string, args ...string) (int, string) {
		var out bytes.Buffer
		env := NewEnv(strings.NewReader(""), &out, &out)
		env.NewEngine = func(string) (engine.Client, error) { return h.eng, nil }
		code := Run(ctx, env, append([]string{"--state-dir", h.dir, "--host-name", name, "--ledger", h.ledger,
			"window", "run", "sweep", "gc", "--dry-run"}, args...))
		return code, out.String()
	}
	code, out := dryRun(hosts[0], "host-a")
	if code != 0 || !strings.Contains(out, "would open the gathering of sweep/gc and run the step on this host (host-a), once hosts host-a, host-b joined") ||
		!strings.Contains(out, "\n  hosts:    host-a, host-b\n") {
		t.Errorf("dry run: exit %d, want 0 saying it would open the gathering of host-a and host-b:\n%s", code, out)
	}
	if code, out := dryRun(hosts[0], "host-a", "-o", "json"); code != 0 || !strings.Contains(out, `"hosts": [
    "host-a",
    "host-b"
  ]`) {
		t.Errorf("dry run -o json: exit %d, want 0 with hosts host-a, host-b:\n%s", code, out)
	}
	// A host the module's members do not name: the join is refused.
	if code, out := dryRun(hosts[0], "host-z"); code != 2 || !strings.Contains(out, "host host-z is not a member of sweep in etcd") {
		t.Errorf("dry run on a host that is not a member: exit %d, want 2 saying so:\n%s", code, out)
	}
	// An etcd that does not answer: a real join fails with nothing held
	// (exit 1), and so does the dry run, naming no host.
	{
		var out bytes.Buffer
		env := NewEnv(strings.NewReader(""), &out, &out)
		env.NewEngine = func(string) (engine.Client, error) { return hosts[0].eng, nil }
		code := Run(ctx, env, []string{"--state-dir", hosts[0].dir, "--host-name", "host-a", "--ledger", "etcd://127.0.0.1:1",
			"--lock-timeout", "2s", "window", "run", "sweep", "gc", "--dry-run"})
		if code != 1 || !strings.Contains(out.String(), "nothing held") || strings.Contains(out.String(), "  hosts:") {
			t.Errorf("dry run, etcd not answering: exit %d, want 1 saying nothing would be held, no hosts:\n%s", code, out.String())
		}
	}
	if ch := hosts[0].eng.Changes(); len(ch) > 0 {
		t.Errorf("a dry run changed the engine: %v", ch)
	}
	// host-a joins and waits for host-b: a gathering is open.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() { c, _ := hosts[0].run(wctx, "window", "run", "sweep", "gc"); done <- c }()
	defer func() { cancel(); <-done }()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, errOut := hosts[1].run(ctx, "window", "run", "sweep", "local")
		if code == 3 && strings.Contains(errOut, "mesh window") && strings.Contains(errOut, "runner host-a") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("a local window beside an open gathering: exit %d, want 3 naming it: %s", code, errOut)
		}
	}
	if c, ok := hosts[1].eng.Get("sweep.app"); !ok || !c.Running {
		t.Error("host-b's local window held sweep.app beside the gathering")
	}
	// host-b's dry run would join it, and says it waits for host-b.
	if code, out := dryRun(hosts[1], "host-b"); code != 0 || !regexp.MustCompile(`would join gathering g-\S+ \(runner host-a; waiting for host-b, until \d\d:\d\d:\d\d\)`).MatchString(out) ||
		!strings.Contains(out, "\n  hosts:    host-a, host-b\n") {
		t.Errorf("dry run beside the open gathering: exit %d, want 0 saying it would join it:\n%s", code, out)
	}
}

// gatheringOf reads module's gathering as etcd has it, through url.
func gatheringOf(t *testing.T, url, module string) (ledger.Gathering, bool) {
	t.Helper()
	env := NewEnv(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	env.Global.Ledger, env.Global.LockTimeout = url, 5*time.Second
	cfg, err := env.etcdLedger()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	g, ok, err := l.Gathering(context.Background(), module)
	if err != nil {
		t.Fatal(err)
	}
	return g, ok
}

// waitGathering waits until module's gathering is in one of states.
func waitGathering(t *testing.T, url, module string, states ...string) ledger.Gathering {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if g, ok := gatheringOf(t, url, module); ok && slices.Contains(states, g.State) {
			return g
		}
	}
	t.Fatalf("module %s's gathering never was %v", module, states)
	return ledger.Gathering{}
}

// TestMeshWindowStepsDiffer: two hosts whose step definitions differ fail
// the gathering. Both exit 2 naming the hosts, and nothing is held.
func TestMeshWindowStepsDiffer(t *testing.T) {
	hosts := meshHosts(t, 2)
	ctx := context.Background()
	for i, h := range hosts {
		file := meshWindowFile(t, t.TempDir(), "1m", fmt.Sprintf("exit %d", i))
		if code, errOut := h.run(ctx, "apply", "-f", file, "--settle", "0s"); code != 0 {
			t.Fatalf("%s: apply exit %d: %s", h.name, code, errOut)
		}
		h.eng.Changes()
	}
	codes, errs, wait := runAll(ctx, hosts, "window", "run", "sweep", "gc")
	wait()
	for i, h := range hosts {
		if codes[i] != 2 || !strings.Contains(errs[i], "differs from host") {
			t.Errorf("%s: exit %d, want 2 saying the step definitions differ: %s", h.name, codes[i], errs[i])
		}
		if ch := h.eng.Changes(); len(ch) > 0 {
			t.Errorf("%s: the engine was changed: %v", h.name, ch)
		}
	}
}

// TestMeshWindowInterruptedKeepsHold: a host that does not run the step is
// interrupted while the step runs on the runner. It exits 130 with its
// container still held: the step may still run. A join after the start is
// refused (exit 3).
func TestMeshWindowInterruptedKeepsHold(t *testing.T) {
	hosts := meshHosts(t, 2)
	dir := t.TempDir()
	file := meshWindowFile(t, dir, "1m", fmt.Sprintf("touch %[1]s/started; while [ ! -e %[1]s/go ]; do sleep 0.02; done", dir))
	ctx := context.Background()
	applyAll(t, hosts, file)
	a, b := hosts[0], hosts[1]
	aDone := make(chan int, 1)
	go func() { c, _ := a.run(ctx, "window", "run", "sweep", "gc", "--settle", "0s"); aDone <- c }()
	waitGathering(t, a.ledger, "sweep", ledger.GatherOpen)
	bctx, cancel := context.WithCancel(ctx)
	bDone := make(chan string, 1)
	go func() {
		c, e := b.run(bctx, "window", "run", "sweep", "gc", "--settle", "0s")
		bDone <- fmt.Sprint(c, " ", e)
	}()
	waitFile(t, filepath.Join(dir, "started"), time.Minute)
	if code, errOut := b.run(ctx, "window", "run", "sweep", "gc"); code != 3 {
		t.Errorf("a join after the start: exit %d, want 3: %s", code, errOut)
	}
	cancel()
	got := <-bDone
	if !strings.HasPrefix(got, "130 ") || !strings.Contains(got, "stay held") {
		t.Errorf("host-b interrupted mid-step: %s; want exit 130 saying its containers stay held", got)
	}
	if c, ok := b.eng.Get("sweep.app"); !ok || c.Running {
		t.Error("host-b brought sweep.app back while the step may still run on host-a")
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := <-aDone; code != 0 {
		t.Errorf("host-a's window: exit %d, want 0", code)
	}
}
