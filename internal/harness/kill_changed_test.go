package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
)

// killChangedMesh is killMesh's service held changed, not stopped: its
// changed copy runs with MODE=read-only for a short exec: step.
const killChangedMesh = `modules:
  MODULE:
    containers:
      svc:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["trap 'sleep 0.$((RANDOM % 8)); exit 0' TERM; while :; do sleep 1 & wait; done"]
        env: {MODE: normal}
        restart: always
        network: none
    steps:
      hold:
        while-changed:
          svc:
            env: {MODE: read-only}
        exec: [sleep, "0.3"]
`

// TestKillChangedHealsInOneApply SIGKILLs windows that hold a service
// changed, at instants spread over their whole life. That is the open's
// switch, the step and the close's switch. After each kill, one apply
// leaves exactly one container of the module: the normal one, the same
// container, running its normal spec with its restart policy. No changed
// copy is left, and no NAME.meshctl-held. Five kills always, more under
// MESHCTL_STRESS=1 or MESHCTL_STRESS_KILLS=N.
func TestKillChangedHealsInOneApply(t *testing.T) {
	host := meshrun.TestEngine(t)
	kills := stressKills(t, 5, 300)
	m := newMeshctl(t, host)
	m.windowArgs = []string{"--settle", "200ms"}
	module, name, file, first := m.changedModule("killchg")
	var life time.Duration
	for range 3 {
		begin := time.Now()
		if out, err := m.Run("window", "run", module, "hold", "-f", file, "--settle", "200ms"); err != nil {
			t.Fatalf("calibration window: %v\n%s", err, out)
		}
		life = max(life, time.Since(begin))
		m.checkOneNormal(module, name, first.ID)
	}
	t.Logf("a whole window lives %s; kills are drawn in [0, %s)", life.Round(time.Millisecond), life.Round(time.Millisecond))
	phases := map[string]int{}
	killed, tries := 0, 0
	for killed < kills {
		tries++
		if tries > 3*kills+10 {
			t.Fatalf("only %d kills in %d tries", killed, tries)
		}
		// Stratified: the i-th kill of a round lands in the i-th of kills
		// equal parts of the window's life.
		delay := time.Duration((float64(tries%kills) + rand.Float64()) / float64(kills) * float64(life))
		phase, wasKilled := m.killWindow(module, file, delay)
		if wasKilled {
			killed++
			phases[phase]++
		}
		out, err := m.Run("apply", "-f", file)
		if err != nil {
			t.Fatalf("kill %d (after %s, in %s): the next apply failed: %v\n%s", killed, delay.Round(time.Millisecond), phase, err, out)
		}
		if strings.HasPrefix(phase, "open") {
			time.Sleep(stopSettle) // a dead window's stop may still be under way
		}
		if !m.oneNormal(module, name, first.ID) {
			t.Fatalf("kill %d (after %s, in %s): one apply did not heal it; the apply said:\n%s", killed, delay.Round(time.Millisecond), phase, out)
		}
	}
	t.Logf("%d kills in %d windows; kills by phase: %v", killed, tries, phases)
}

// changedModule applies killChangedMesh as a new module, prefix and a
// random suffix. It returns the module, its service, the file and the
// service's normal container.
func (m *meshctl) changedModule(prefix string) (module, name, file string, normal engine.Container) {
	m.T.Helper()
	module = fmt.Sprintf("%s%08x", prefix, rand.Uint32())
	name = module + ".svc"
	m.CleanupModule(module)
	file = filepath.Join(m.Dir, "mesh.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(killChangedMesh, "MODULE", module)), 0o600); err != nil {
		m.T.Fatal(err)
	}
	if out, err := m.Run("apply", "-f", file); err != nil {
		m.T.Fatalf("first apply: %v\n%s", err, out)
	}
	return module, name, file, m.inspect(name)
}

// checkOneNormal fails the test unless oneNormal.
func (m *meshctl) checkOneNormal(module, name, id string) {
	m.T.Helper()
	if !m.oneNormal(module, name, id) {
		m.T.FailNow()
	}
}

// oneNormal reports, logging what is wrong, whether the module has exactly
// one container: the normal one with id, healed, and running its normal
// env. A changed copy or a NAME.meshctl-held left is a failure.
func (m *meshctl) oneNormal(module, name, id string) bool {
	m.T.Helper()
	ok := m.healed(name, id)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := m.Eng.List(ctx, map[string]string{lifecycle.LabelModule: module})
	if err != nil {
		m.T.Fatal(err)
	}
	if len(list) != 1 {
		var names []string
		for _, c := range list {
			names = append(names, c.Name)
		}
		m.T.Errorf("module %s has %d containers (%s), want only %s", module, len(list), strings.Join(names, ", "), name)
		ok = false
	}
	if x := m.inspect(name); x.Labels[lifecycle.LabelWindow] != "" {
		m.T.Errorf("%s is labelled with window %s: the changed copy runs", name, x.Labels[lifecycle.LabelWindow])
		ok = false
	}
	return ok
}

// switchCall is an engine call of a changed hold's switch, as its event.
type switchCall struct {
	call  string
	match func(e eventcheck.Event) bool
}

// switchCalls are the calls of the open's switch and the close's, in their
// order. name is the service and normal its normal container's id.
func switchCalls(name, normal string) []switchCall {
	copyOf := func(action string) func(eventcheck.Event) bool {
		return func(e eventcheck.Event) bool { return e.Action == action && e.Labels[lifecycle.LabelWindow] != "" }
	}
	return []switchCall{
		{"open: the normal one set aside", func(e eventcheck.Event) bool {
			return e.Action == "rename" && e.Name == lifecycle.HeldName(name)
		}},
		{"open: the copy created", copyOf("create")},
		{"open: the copy started", copyOf("start")},
		{"close: the copy stopped", copyOf("kill")},
		{"close: the copy removed", copyOf("destroy")},
		{"close: the normal one renamed back", func(e eventcheck.Event) bool { return e.Action == "rename" && e.Name == name }},
		{"close: the normal one started", func(e eventcheck.Event) bool { return e.Action == "start" && e.ID == normal }},
	}
}

// TestKillChangedAtEachSwitchCall SIGKILLs a window that holds a service
// changed the moment the engine reports each call of its two switches.
// Drawn instants rarely land in the close's switch, which is short. After
// each kill, one apply leaves only the normal container, running its
// normal spec.
func TestKillChangedAtEachSwitchCall(t *testing.T) {
	host := meshrun.TestEngine(t)
	m := newMeshctl(t, host)
	module, name, file, first := m.changedModule("killsw")
	for _, sc := range switchCalls(name, first.ID) {
		if !m.killWindowOn(host, module, file, sc.match) {
			t.Fatalf("%s: the window ended before the engine reported it", sc.call)
		}
		out, err := m.Run("apply", "-f", file)
		if err != nil {
			t.Fatalf("killed at %s: the next apply failed: %v\n%s", sc.call, err, out)
		}
		if !m.oneNormal(module, name, first.ID) {
			t.Fatalf("killed at %s: one apply did not heal it; the apply said:\n%s", sc.call, out)
		}
	}
}

// killWindowOn runs the module's window and SIGKILLs it as soon as the
// engine reports an event that match accepts. It reports whether the kill
// came before the window ended.
func (m *meshctl) killWindowOn(host, module, file string, match func(eventcheck.Event) bool) bool {
	m.T.Helper()
	rec, err := eventcheck.Record(m.T.Context(), host, func(name string, _ map[string]string) bool {
		return strings.HasPrefix(name, module+".")
	})
	if err != nil {
		m.T.Fatal(err)
	}
	defer rec.Stop()
	var stderr meshrun.Output
	cmd := m.Command(append([]string{"window", "run", module, "hold", "-f", file}, m.windowArgs...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		m.T.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				m.T.Fatalf("window run: %v\n%s", err, stderr.String())
			}
			return false
		case <-tick.C:
			if slices.ContainsFunc(rec.Events(), match) {
				_ = cmd.Process.Signal(syscall.SIGKILL)
				<-done
				return true
			}
		}
	}
}
