package harness

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
)

// replaceMesh is a module of two containers on a module network whose
// internal flag is INTERNAL. api depends on db and answers as backend too.
const replaceMesh = `modules:
  MODULE:
    networks:
      default: {internal: INTERNAL}
    containers:
      db:
        image: meshtest/busybox:1
        command: [sleep, "3600"]
        init: true
        networks: [default]
      api:
        image: meshtest/busybox:1
        command: [sleep, "3600"]
        init: true
        depends-on: [db]
        networks:
          default: {aliases: [backend]}
`

// replaceSettle is the applies' --settle. The containers sleep and never
// exit: what is checked is the network they are put back on, not their
// start, so a short settle tests as much.
const replaceSettle = "300ms"

// replaceRig is meshctl on the test engine with the fault proxy in front.
type replaceRig struct {
	t     *testing.T
	m     *meshctl
	proxy *faultproxy.Proxy
}

func newReplaceRig(t *testing.T) *replaceRig {
	host := meshrun.TestEngine(t)
	p, err := faultproxy.Start(filepath.Join(shortTempDir(t), "p.sock"), host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return &replaceRig{t: t, m: newMeshctl(t, host), proxy: p}
}

// module makes a module of its own and applies it with internal false.
func (g *replaceRig) module(t *testing.T) (module, file string) {
	module = fmt.Sprintf("netrp%08x", rand.Uint32())
	g.m.CleanupModule(module)
	file = filepath.Join(t.TempDir(), "mesh.yaml")
	g.write(t, module, file, false)
	if out, err := g.m.Run("apply", "-f", file, "--settle", replaceSettle); err != nil {
		t.Fatalf("setup apply: %v\n%s", err, out)
	}
	return module, file
}

func (g *replaceRig) write(t *testing.T, module, file string, internal bool) {
	src := strings.NewReplacer("MODULE", module, "INTERNAL", fmt.Sprint(internal)).Replace(replaceMesh)
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
}

// exitOf returns the exit status of a finished command.
func exitOf(t *testing.T, err error) int {
	t.Helper()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Fatalf("meshctl: %v", err)
	return -1
}

// checkBack checks that both containers run on the module's network, which
// exists, each under its name and aliases.
func (g *replaceRig) checkBack(t *testing.T, module, when string) engine.Network {
	t.Helper()
	ctx := t.Context()
	list, err := g.m.Eng.List(ctx, map[string]string{"io.meshctl.module": module})
	if err != nil {
		t.Fatal(err)
	}
	var running []string
	for _, c := range list {
		if c.Running {
			running = append(running, c.Name)
		} else {
			t.Errorf("%s: %s is %s, want it running", when, c.Name, c.State)
		}
	}
	if slices.Sort(running); !slices.Equal(running, []string{module + ".api", module + ".db"}) {
		t.Errorf("%s: running %v, want %s.api and %s.db", when, running, module, module)
	}
	n, err := g.m.Eng.InspectNetwork(ctx, "meshctl."+module+".default")
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if !slices.Equal(n.Containers, []string{module + ".api", module + ".db"}) {
		t.Errorf("%s: network %s has %v, want both containers", when, n.Name, n.Containers)
	}
	return n
}

// fired returns the faults the proxy injected into calls.
func fired(calls []faultproxy.Call) []string {
	var out []string
	for _, c := range calls {
		if c.Fault != "" {
			out = append(out, string(c.Fault)+" "+c.Method+" "+c.Route)
		}
	}
	return out
}

// TestNetworkReplacePutsBack: an apply that changes a module network's
// internal flag stops the network's containers to make it again. One
// engine call that fails at any door of that replace (the network's
// removal or creation, a connect, a start, a stop) must not leave them
// stopped. The apply puts back what it stopped before it exits 1: the
// network (the new one if it was made, else as it was), each container on
// it under its aliases, running. Its report says the network failed and
// what was put back, not recreate. SIGTERM during the replace (its removal
// in flight) exits 130, once the same put-back is done. Then an apply
// without faults carries the change through. The doors share one module.
// Each asks for the flag its network does not have, so each is a replace.
func TestNetworkReplacePutsBack(t *testing.T) {
	g := newReplaceRig(t)
	module, file := g.module(t)
	internal, broken := false, false
	for _, door := range []struct {
		name string
		rule faultproxy.Rule
		// made says whether the new network was made before the fault.
		made bool
	}{
		{"network-remove", faultproxy.Rule{Method: "DELETE", Route: "/networks/{id}", Nth: 1}, false},
		{"network-create", faultproxy.Rule{Method: "POST", Route: "/networks/create", Nth: 1}, false},
		{"connect", faultproxy.Rule{Method: "POST", Route: "/networks/{id}/connect", Nth: 2}, true},
		{"start", faultproxy.Rule{Method: "POST", Route: "/containers/{id}/start", Nth: 2}, true},
		{"stop", faultproxy.Rule{Method: "POST", Route: "/containers/{id}/stop", Nth: 2}, false},
	} {
		ok := t.Run(door.name, func(t *testing.T) {
			if broken {
				// The last door failed, and may have left its containers
				// stopped. This one starts from a converged module.
				g.converge(t, module, file, internal)
			}
			want := !internal
			g.write(t, module, file, want)
			door.rule.Class = faultproxy.Fail
			before := len(g.proxy.Calls())
			g.proxy.SetSchedule(faultproxy.NewSchedule(1, door.rule))
			stdout, stderr, err := g.m.Run2("--docker-host", g.proxy.Host(), "apply", "-f", file, "--settle", replaceSettle)
			g.proxy.SetSchedule(nil)
			t.Logf("%s%s", stdout, stderr)
			if f := fired(g.proxy.Calls()[before:]); len(f) != 1 {
				t.Fatalf("faults injected: %v, want one at %s", f, door.rule)
			}
			if code := exitOf(t, err); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if door.made {
				internal = want
			}
			if n := g.checkBack(t, module, "after the failed replace"); n.Internal != internal {
				t.Errorf("network internal %v, want %v (the new one only if it was made)", n.Internal, internal)
			}
			checkPutBackReport(t, module, stdout)
		})
		broken = !ok
	}
	t.Run("signal", func(t *testing.T) {
		if broken {
			g.converge(t, module, file, internal)
		}
		g.write(t, module, file, !internal)
		g.signalled(t, file)
		if n := g.checkBack(t, module, "after the signalled replace"); n.Internal != internal {
			t.Errorf("network %s has internal %v: its removal never reached the engine", n.Name, n.Internal)
		}
	})
	t.Run("next-apply", func(t *testing.T) {
		g.converge(t, module, file, !internal)
	})
}

// converge applies the module with internal, without faults, and checks
// that the apply carried it through.
func (g *replaceRig) converge(t *testing.T, module, file string, internal bool) {
	t.Helper()
	g.write(t, module, file, internal)
	if out, err := g.m.Run("apply", "-f", file, "--settle", replaceSettle); err != nil {
		t.Fatalf("apply with internal %v: %v\n%s", internal, err, out)
	}
	if n := g.checkBack(t, module, "after an apply without faults"); n.Internal != internal {
		t.Fatalf("after an apply without faults: network %s has internal %v, want %v", n.Name, n.Internal, internal)
	}
}

// checkPutBackReport checks that a report says the network replace failed
// and its containers were put back, and claims no recreate. A container
// whose recorded spec has the flag asked for is unchanged, not failed.
func checkPutBackReport(t *testing.T, module, stdout string) {
	t.Helper()
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.Contains(f[0], module) {
			continue
		}
		// A container whose spec already has the flag is unchanged.
		if f[1] != "failed" && (f[1] != "unchanged" || strings.HasPrefix(f[0], "meshctl.")) {
			t.Errorf("report line %q: want the action failed", line)
		}
		if !strings.Contains(line, "put back") {
			t.Errorf("report line %q: want it to say what was put back", line)
		}
	}
}

// signalled applies file through the proxy, whose first network
// removal waits a minute, and SIGTERMs the apply once that removal is in
// flight. The apply must exit 130.
func (g *replaceRig) signalled(t *testing.T, file string) {
	g.proxy.SetSchedule(faultproxy.NewSchedule(1,
		faultproxy.Rule{Method: "DELETE", Route: "/networks/{id}", Nth: 1, Class: faultproxy.Delay, Delay: time.Minute}))
	defer g.proxy.SetSchedule(nil)
	before := len(g.proxy.Calls())
	var stdout, stderr meshrun.Output
	cmd := g.m.Command("--docker-host", g.proxy.Host(), "apply", "-f", file, "--settle", replaceSettle)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for len(fired(g.proxy.Calls()[before:])) == 0 {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("the apply never reached the network's removal\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	t.Logf("%s%s", stdout.String(), stderr.String())
	if code := exitOf(t, err); code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
}
