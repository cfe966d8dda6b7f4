package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
)

// killRecreateMesh is the module TestKillRecreateHealsInOneApply recreates:
// each apply flips its label ver (VERSION), so each one replaces the
// service, whose graceful stop takes half a second (a kill can land while
// the engine still carries out the dead apply's stop).
const killRecreateMesh = `modules:
  MODULE:
    containers:
      svc:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["trap 'sleep 0.5; exit 0' TERM; while :; do sleep 1 & wait; done"]
        restart: always
        network: none
        labels: {ver: VERSION}
`

// killStartFirstMesh is the same service replaced start-first:
// on a module network, its old container retired after a drain of 200ms.
const killStartFirstMesh = `modules:
  MODULE:
    networks: {net: {}}
    containers:
      svc:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["trap 'sleep 0.5; exit 0' TERM; while :; do sleep 1 & wait; done"]
        restart: always
        networks: [net]
        update-order: start-first
        drain: 200ms
        labels: {ver: VERSION}
`

// TestKillRecreateHealsInOneApply SIGKILLs applies that recreate a service
// at instants spread over their whole life (lock, claim, the new container
// made under NAME.meshctl-new before the old one stops, the stop, the
// renames, the health gate, the old one's removal, the record) and checks
// after each kill that ONE apply of the same file heals the host (CONTRACT
// §6 liveness): it exits 0 and leaves exactly one container of the
// service, under its name, running the version asked for, with its restart
// policy; nothing aside, nothing under the temporary name. The first kill
// lands where the new container exists under its temporary name and the
// old one still has the name (Executor.Recreate's first instant). Eight
// kills stop-first, four start-first; MESHCTL_STRESS=1 makes each 100 (or
// MESHCTL_STRESS_KILLS=N).
func TestKillRecreateHealsInOneApply(t *testing.T) {
	host := meshrun.TestEngine(t)
	t.Run("stop-first", func(t *testing.T) { killRecreate(t, host, killRecreateMesh, 8, "1s") })
	// Start-first: the new one under its temporary name runs beside the
	// old one; a kill after its gate leaves the old one retiring, and the
	// heal carries the recreate through.
	t.Run("start-first", func(t *testing.T) {
		// Start-first promises the old one serves until a new one has passed
		// its gate. So no container of the service is stopped under its
		// name: only once retiring, by the recreate or the heal carrying it
		// through. The heal of a kill before the gate once stopped and
		// restarted the old one.
		rec, err := eventcheck.Record(t.Context(), host, func(name string, _ map[string]string) bool { return strings.HasPrefix(name, "kre") })
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Stop()
		// Four kills: the first before the gate (where the heal once
		// stopped the old one), the others spread over the recreate's life.
		// Its gate is the settle alone: a short one keeps the run short.
		name := killRecreate(t, host, killStartFirstMesh, 4, "300ms")
		if err := rec.Sync(t.Context(), enginetest.Image); err != nil {
			t.Fatal(err)
		}
		for _, e := range rec.Events() {
			if e.Name == name && (e.Action == "kill" || e.Action == "die" || e.Action == "stop") {
				t.Errorf("%s %s under the service's name at %s: start-first stopped a serving container", e.Action, e.ID[:12], e.At.Format(time.StampMilli))
			}
		}
	})
}

// killRecreate is TestKillRecreateHealsInOneApply on the service meshText
// describes, with kills kills (more under MESHCTL_STRESS), each apply
// gated by settle. It returns the service's engine name.
func killRecreate(t *testing.T, host, meshText string, kills int, settle string) string {
	kills = stressKills(t, kills, 100)
	m := newMeshctl(t, host)
	module := fmt.Sprintf("kre%08x", rand.Uint32())
	name := module + ".svc"
	m.CleanupModule(module)
	files := map[string]string{}
	for _, v := range []string{"a", "b"} {
		files[v] = filepath.Join(m.Dir, "mesh-"+v+".yaml")
		text := strings.NewReplacer("MODULE", module, "VERSION", v).Replace(meshText)
		if err := os.WriteFile(files[v], []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	apply := func(v string) []string { return []string{"apply", "-f", files[v], "--settle", settle} }
	if out, err := m.Run(apply("a")...); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out)
	}

	// Applies left alone: how long a recreate lives here, so that the
	// kills are spread over it.
	var life time.Duration
	version := "a"
	for range 2 {
		version = map[string]string{"a": "b", "b": "a"}[version]
		begin := time.Now()
		if out, err := m.Run(apply(version)...); err != nil {
			t.Fatalf("calibration apply: %v\n%s", err, out)
		}
		life = max(life, time.Since(begin))
		m.checkReplaced(module, name, version)
	}
	t.Logf("a recreate lives %s; kills are drawn in [0, %s)", life.Round(time.Millisecond), life.Round(time.Millisecond))

	killed, tries, atNew := 0, 0, 0
	for killed < kills {
		tries++
		if tries > 3*kills+10 {
			t.Fatalf("only %d kills in %d tries: the applies end before the kill lands", killed, tries)
		}
		version = map[string]string{"a": "b", "b": "a"}[version]
		var at string
		var wasKilled bool
		if atNew == 0 {
			// The new instant, first: the new container made, the old one
			// not yet renamed aside (it is being stopped).
			at, wasKilled = m.killApplyAtNew(name, apply(version))
			if at == "new" {
				atNew++
			}
		} else {
			// Eighths of the life in a stride of 5, which visits all eight
			// in eight tries: a few kills are spread over the whole life.
			slot := float64(tries*5%8) + rand.Float64()
			delay := time.Duration(slot / 8 * float64(life))
			at = delay.Round(time.Millisecond).String()
			wasKilled = m.killApply(apply(version), delay)
		}
		if wasKilled {
			killed++
		}
		out, errOut, err := m.Run2(apply(version)...)
		if err != nil {
			t.Fatalf("kill %d (at %s): the next apply failed: %v\n%s%s", killed, at, err, out, errOut)
		}
		// Healed before the plan: the report knows no container of a
		// temporary name (an orphan row would say the heal missed it).
		if strings.Contains(out, ".meshctl-") {
			t.Fatalf("kill %d (at %s): the healing apply's report shows a leftover:\n%s", killed, at, out)
		}
		if !m.replaced(module, name, version) {
			t.Fatalf("kill %d (at %s): one apply did not heal it; the apply said:\n%s%s", killed, at, out, errOut)
		}
	}
	if atNew == 0 {
		t.Fatal("no kill landed between the new container's create and the old one's rename")
	}
	t.Logf("%d kills in %d applies, %d of them with the new container under its temporary name", killed, tries, atNew)
	return name
}

// killApply starts args (an apply) and SIGKILLs it after delay; it returns
// whether the kill is what ended it.
func (m *meshctl) killApply(args []string, delay time.Duration) bool {
	cmd := m.Command(args...)
	if err := cmd.Start(); err != nil {
		m.T.Fatal(err)
	}
	time.Sleep(delay)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	return m.killedBy(cmd.Wait())
}

// killApplyAtNew starts args (an apply that recreates name) and SIGKILLs it
// as soon as the engine has the new container under its temporary name. It
// returns "new" when the kill landed there (checked after it: the new one
// still under the temporary name, the old one still under the name), and
// whether the kill is what ended the apply.
func (m *meshctl) killApplyAtNew(name string, args []string) (string, bool) {
	before := m.inspect(name)
	cmd := m.Command(args...)
	if err := cmd.Start(); err != nil {
		m.T.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := m.Eng.Inspect(ctx, name+".meshctl-new")
		cancel()
		if err == nil {
			break
		}
		if !engine.IsNotFound(err) {
			m.T.Fatalf("inspect %s.meshctl-new: %v", name, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	wasKilled := m.killedBy(cmd.Wait())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, newErr := m.Eng.Inspect(ctx, name+".meshctl-new")
	now, err := m.Eng.Inspect(ctx, name)
	if wasKilled && newErr == nil && err == nil && now.ID == before.ID {
		return "new", true
	}
	return "after the new instant", wasKilled
}

// killedBy reports whether err, a meshctl's end, is its SIGKILL.
func (m *meshctl) killedBy(err error) bool {
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		m.T.Fatalf("apply: %v", err)
	}
	return false
}

// checkReplaced fails the test unless replaced.
func (m *meshctl) checkReplaced(module, name, version string) {
	m.T.Helper()
	if !m.replaced(module, name, version) {
		m.T.FailNow()
	}
}

// replaced reports, logging what is wrong, whether the module's only
// container is name, running with restart policy always and label ver =
// version.
func (m *meshctl) replaced(module, name, version string) bool {
	m.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := m.Eng.List(ctx, map[string]string{"io.meshctl.module": module})
	if err != nil {
		m.T.Fatalf("list %s: %v", module, err)
	}
	if len(list) != 1 || list[0].Name != name {
		var names []string
		for _, c := range list {
			names = append(names, c.Name+" ("+c.State+")")
		}
		m.T.Errorf("module %s has %s, want %s alone", module, strings.Join(names, ", "), name)
		return false
	}
	x := m.inspect(name)
	if x.State != "running" || x.RestartPolicy != "always" || x.Labels["ver"] != version {
		m.T.Errorf("%s is %s, restart %q, ver %q; want running, always, %s", name, x.State, x.RestartPolicy, x.Labels["ver"], version)
		return false
	}
	return true
}
