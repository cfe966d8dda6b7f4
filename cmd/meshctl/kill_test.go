package main

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
	host := testEngine(t)
	kills := stressKills(t, 8, 300)

	m := newMeshctl(t, host)
	module := fmt.Sprintf("kill%08x", rand.Uint32())
	name := module + ".svc"
	m.cleanupModule(module)
	file := filepath.Join(m.dir, "mesh.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(killMesh, "MODULE", module)), 0o600); err != nil {
		t.Fatal(err)
	}

	// The module runs; its container is the one every kill must leave
	// running (the same one: a stale hold is released as the close would,
	// by starting it, not by recreating it).
	if out, err := m.run("apply", "-f", file); err != nil {
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
		if out, err := m.run("window", "run", module, "hold", "-f", file); err != nil {
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
		out, err := m.run("apply", "-f", file)
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

// testEngine returns the test engine's address, or skips the test when
// there is none (fails under CI=true).
func testEngine(t *testing.T) string {
	t.Helper()
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	err := errors.New("MESHCTL_TEST_DOCKER_HOST is not set (scripts/engine.sh start)")
	if host != "" {
		err = pingTestEngine()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no test engine: %v", err)
		}
		t.Skipf("no test engine: %v", err)
	}
	return host
}

// meshctl runs this test binary as meshctl (see TestMain), with a private
// HOME and state directory, against the test engine.
type meshctl struct {
	t     *testing.T
	dir   string
	bin   string
	env   []string
	state string
	eng   engine.Client
}

func newMeshctl(t *testing.T, host string) *meshctl {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "meshctl")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	st := filepath.Join(dir, "state")
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TMPDIR=" + os.TempDir(),
		"DOCKER_HOST=" + host,
		"MESHCTL_STATE_DIR=" + st,
	}
	eng, err := engine.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &meshctl{t: t, dir: dir, bin: bin, env: env, state: st, eng: eng}
}

func (m *meshctl) command(args ...string) *exec.Cmd {
	cmd := exec.Command(m.bin, args...)
	cmd.Dir, cmd.Env = m.dir, m.env
	// An exec: step still holding the window's stderr must not hang Wait.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// run runs meshctl to its end and returns its stdout and stderr together.
func (m *meshctl) run(args ...string) (string, error) {
	stdout, stderr, err := m.run2(args...)
	return stdout + stderr, err
}

// run2 runs meshctl to its end and returns its stdout and its stderr.
func (m *meshctl) run2(args ...string) (string, string, error) {
	var stdout, stderr lockedBuilder
	cmd := m.command(args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// killWindow starts a window on module and SIGKILLs it after delay. It
// returns the phase the window was in by its stderr at that instant, and
// whether the kill is what ended it (not its own exit).
func (m *meshctl) killWindow(module, file string, delay time.Duration) (string, bool) {
	var stderr lockedBuilder
	cmd := m.command("window", "run", module, "hold", "-f", file)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		m.t.Fatal(err)
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
		m.t.Fatalf("window run: %v\n%s", err, stderr.String())
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
	case strings.Contains(stderr, "stopped "):
		return "open (stopped)"
	case strings.Contains(stderr, ": holding "):
		return "open (stopping)"
	}
	return "open (recording)"
}

func (m *meshctl) inspect(name string) engine.Container {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := m.eng.Inspect(ctx, name)
	if err != nil {
		m.t.Fatalf("inspect %s: %v", name, err)
	}
	return x
}

// check fails the test unless healed.
func (m *meshctl) check(name, id string) {
	m.t.Helper()
	if !m.healed(name, id) {
		m.t.FailNow()
	}
}

// healed reports, logging what is wrong, whether the container name is the
// one with id, running (not restarting) with restart policy always, no hold
// is recorded and no window is listed as not closed.
func (m *meshctl) healed(name, id string) bool {
	m.t.Helper()
	ok := true
	x := m.inspect(name)
	if x.ID != id {
		m.t.Errorf("%s is a new container %.12s, not %.12s: the held container was replaced, not brought back", name, x.ID, id)
		ok = false
	}
	if x.State != "running" || x.RestartPolicy != "always" {
		m.t.Errorf("%s is %s with restart policy %q, want running with always", name, x.State, x.RestartPolicy)
		ok = false
	}
	d, err := state.Open(m.state)
	if err != nil {
		m.t.Fatal(err)
	}
	var doc coord.HoldsDoc
	if _, err := d.Read(coord.HoldsFile, &doc); err != nil {
		m.t.Fatal(err)
	}
	if len(doc.Holds) != 0 {
		m.t.Errorf("holds.json still records %d hold(s): %+v", len(doc.Holds), doc.Holds)
		ok = false
	}
	out, errOut, err := m.run2("window", "list", "-o", "json")
	if err != nil {
		m.t.Fatalf("window list: %v\n%s%s", err, out, errOut)
	}
	var list struct {
		Windows []json.RawMessage `json:"windows"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		m.t.Fatalf("window list -o json: %v\n%s", err, out)
	}
	if len(list.Windows) != 0 {
		m.t.Errorf("window list shows windows not closed: %s", out)
		ok = false
	}
	return ok
}

// cleanupModule removes the module's containers now and when the test ends.
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

func (m *meshctl) cleanupModule(module string) {
	rm := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := m.eng.List(ctx, map[string]string{"io.meshctl.module": module})
		if err != nil {
			m.t.Logf("cleanup %s: %v", module, err)
			return
		}
		for _, x := range list {
			if err := m.eng.Remove(ctx, x.ID); err != nil {
				m.t.Logf("cleanup %s: %v", x.Name, err)
			}
		}
		nets, err := m.eng.Networks(ctx, map[string]string{"io.meshctl.module": module})
		if err != nil {
			m.t.Logf("cleanup %s: %v", module, err)
			return
		}
		for _, n := range nets {
			if err := m.eng.RemoveNetwork(ctx, n.ID); err != nil {
				m.t.Logf("cleanup %s: %v", n.Name, err)
			}
		}
	}
	rm()
	m.t.Cleanup(rm)
}
