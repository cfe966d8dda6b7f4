package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/state"
)

// killMesh is the module TestKillHealsInOneApply windows on: a service held
// by a short exec: step, whose graceful stop takes 0 to 0.7 s, drawn anew at
// each stop (a real service flushes before it exits; a kill can land while
// the engine still carries out the dead window's stop).
const killMesh = `modules:
  MODULE:
    containers:
      svc:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["trap 'sleep 0.$((RANDOM % 8)); exit 0' TERM; while :; do sleep 1 & wait; done"]
        restart: always
        network: none
    steps:
      hold:
        while-stopped: [svc]
        exec: [sleep, "0.3"]
`

// stopSettle is longer than the slowest graceful stop of killMesh's service.
const stopSettle = time.Second

// TestKillHealsInOneApply SIGKILLs window runs at instants spread over
// their whole life (lock, open, step, close, exit) and checks after each
// kill that ONE apply heals the host (CONTRACT §6 liveness): it exits 0,
// releases whatever hold the dead window left, and the same container runs
// again with the restart policy the file asks for — whether the window died
// before its stop, mid-stop (policy already "no"), during its step, or
// mid-close. Eight kills always; MESHCTL_STRESS=1 makes it 300 (or
// MESHCTL_STRESS_KILLS=N), for which give go test -timeout 30m.
func TestKillHealsInOneApply(t *testing.T) {
	host := meshrun.TestEngine(t)
	kills := stressKills(t, 8, 300)

	m := newMeshctl(t, host)
	module := fmt.Sprintf("kill%08x", rand.Uint32())
	name := module + ".svc"
	m.CleanupModule(module)
	file := filepath.Join(m.Dir, "mesh.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(killMesh, "MODULE", module)), 0o600); err != nil {
		t.Fatal(err)
	}

	// The module runs; its container is the one every kill must leave
	// running (the same one: a stale hold is released as the close would,
	// by starting it, not by recreating it).
	if out, err := m.Run("apply", "-f", file); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out)
	}
	first := m.inspect(name)
	if first.State != "running" || first.RestartPolicy != "always" {
		t.Fatalf("after the first apply %s is %s with restart %q, want running with always", name, first.State, first.RestartPolicy)
	}

	// Windows left alone: how long a whole life takes here, so that the
	// kills are spread over it, lock to exit. The stop takes a random time:
	// take the longest of three.
	var life time.Duration
	for range 3 {
		begin := time.Now()
		if out, err := m.Run("window", "run", module, "hold", "-f", file); err != nil {
			t.Fatalf("calibration window: %v\n%s", err, out)
		}
		life = max(life, time.Since(begin))
		m.check(name, first.ID)
	}
	t.Logf("a whole window lives %s; kills are drawn in [0, %s)", life.Round(time.Millisecond), life.Round(time.Millisecond))

	phases := map[string]int{}
	killed, tries := 0, 0
	start := time.Now()
	for killed < kills {
		tries++
		if tries > 3*kills+10 {
			t.Fatalf("only %d kills in %d tries: the windows end before the kill lands", killed, tries)
		}
		// Stratified: the i-th kill of a round of 8 lands in the i-th
		// eighth of the window's life, at a random point in it.
		slot := float64(tries%8) + rand.Float64()
		delay := time.Duration(slot / 8 * float64(life))
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
			// The engine may still be carrying out the dead window's stop
			// (the service takes up to 0.7 s): what the apply did must
			// still hold once that stop is over.
			time.Sleep(stopSettle)
		}
		if !m.healed(name, first.ID) {
			t.Fatalf("kill %d (after %s, in %s): one apply did not heal it; the apply said:\n%s", killed, delay.Round(time.Millisecond), phase, out)
		}
	}
	per := time.Since(start) / time.Duration(tries)
	t.Logf("%d kills in %d windows, %s per window and apply; kills by phase: %v", killed, tries, per.Round(time.Millisecond), phases)
}

// meshctl runs this test binary as meshctl (see TestMain) on the test
// engine. The harness's own checks are its methods.
type meshctl struct {
	*meshrun.Meshctl
	// windowArgs are more arguments for the window runs killWindow starts.
	windowArgs []string
}

func newMeshctl(t *testing.T, host string) *meshctl {
	t.Helper()
	return &meshctl{Meshctl: meshrun.New(t, host)}
}

// killWindow starts a window on module and SIGKILLs it after delay. It
// returns the phase the window was in by its stderr at that instant, and
// whether the kill is what ended it (not its own exit).
func (m *meshctl) killWindow(module, file string, delay time.Duration) (string, bool) {
	var stderr meshrun.Output
	cmd := m.Command(append([]string{"window", "run", module, "hold", "-f", file}, m.windowArgs...)...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		m.T.Fatal(err)
	}
	time.Sleep(delay)
	phase := windowPhase(stderr.String())
	_ = cmd.Process.Signal(syscall.SIGKILL)
	err := cmd.Wait()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return phase, true
		}
	}
	if err != nil {
		m.T.Fatalf("window run: %v\n%s", err, stderr.String())
	}
	return "exited", false
}

// windowPhase names where a window was from what it had written to stderr.
func windowPhase(stderr string) string {
	switch {
	case strings.Contains(stderr, " closed after "):
		return "exiting"
	case strings.Contains(stderr, " finished in "):
		return "close"
	case strings.Contains(stderr, "step hold started"):
		return "step"
	case strings.Contains(stderr, " runs changed"):
		return "open (changed)"
	case strings.Contains(stderr, "stopped "):
		return "open (stopped)"
	case strings.Contains(stderr, ": holding "):
		return "open (stopping)"
	}
	return "open (recording)"
}

func (m *meshctl) inspect(name string) engine.Container {
	m.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := m.Eng.Inspect(ctx, name)
	if err != nil {
		m.T.Fatalf("inspect %s: %v", name, err)
	}
	return x
}

// check fails the test unless healed.
func (m *meshctl) check(name, id string) {
	m.T.Helper()
	if !m.healed(name, id) {
		m.T.FailNow()
	}
}

// healed reports, logging what is wrong, whether the container name is the
// one with id, running (not restarting) with restart policy always, no hold
// is recorded and no window is listed as not closed.
func (m *meshctl) healed(name, id string) bool {
	m.T.Helper()
	ok := true
	x := m.inspect(name)
	if x.ID != id {
		m.T.Errorf("%s is a new container %.12s, not %.12s: the held container was replaced, not brought back", name, x.ID, id)
		ok = false
	}
	if x.State != "running" || x.RestartPolicy != "always" {
		m.T.Errorf("%s is %s with restart policy %q, want running with always", name, x.State, x.RestartPolicy)
		ok = false
	}
	d, err := state.Open(m.State)
	if err != nil {
		m.T.Fatal(err)
	}
	var doc coord.HoldsDoc
	if _, err := d.Read(coord.HoldsFile, &doc); err != nil {
		m.T.Fatal(err)
	}
	if len(doc.Holds) != 0 {
		m.T.Errorf("holds.json still records %d hold(s): %+v", len(doc.Holds), doc.Holds)
		ok = false
	}
	out, errOut, err := m.Run2("window", "list", "-o", "json")
	if err != nil {
		m.T.Fatalf("window list: %v\n%s%s", err, out, errOut)
	}
	var list struct {
		Windows []json.RawMessage `json:"windows"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		m.T.Fatalf("window list -o json: %v\n%s", err, out)
	}
	if len(list.Windows) != 0 {
		m.T.Errorf("window list shows windows not closed: %s", out)
		ok = false
	}
	return ok
}

// stressKills is how many kills a kill test makes: usual, or stress under
// MESHCTL_STRESS=1, or MESHCTL_STRESS_KILLS.
func stressKills(t *testing.T, usual, stress int) int {
	t.Helper()
	kills := usual
	if os.Getenv("MESHCTL_STRESS") == "1" {
		kills = stress
	}
	if s := os.Getenv("MESHCTL_STRESS_KILLS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MESHCTL_STRESS_KILLS=%q: want a positive number", s)
		}
		kills = n
	}
	return kills
}
