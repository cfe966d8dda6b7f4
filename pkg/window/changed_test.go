package window

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// changedYAML is a registry held read-only for a step that writes ran.
func changedYAML(ran string) string {
	return fmt.Sprintf(`
modules:
  store:
    containers:
      registry:
        image: %[1]s
        env: {A: normal, B: kept}
    steps:
      gc:
        while-changed:
          registry:
            env: {A: read-only-value}
            healthcheck: {test: [CMD, "true"], interval: 1s}
        exec: [/bin/sh, -c, 'echo ran > "$0"', %[2]q]
`, enginetest.Image, ran)
}

// changedSetup applies changedYAML to a fake engine. It returns the state
// directory, the engine, the normal registry and where the step writes.
func changedSetup(t *testing.T) (*state.Dir, *enginetest.Fake, enginetest.Container, string) {
	t.Helper()
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(dir, "ran")
	f, err := mesh.Decode("mesh.yaml", []byte(changedYAML(ran)))
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.NewFake(enginetest.Image)
	applyFresh(t, d, eng, f)
	normal, ok := eng.Get("store.registry")
	if !ok {
		t.Fatal("no registry")
	}
	return d, eng, normal, ran
}

// TestWindowHoldsChanged opens a window that holds the registry changed.
// While the step runs, the changed copy runs under the name with the
// normal restart policy and the window's label. The normal one waits
// aside, stopped, with restart no. The hold records both ids and the
// normal spec's hash, and no env value. The normal one stopped before the
// copy started. After the close, the very normal container runs again
// under its name, and nothing else is left.
func TestWindowHoldsChanged(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	eng.SetHealth(enginetest.Image, "healthy", "")
	var during []enginetest.Container
	var hold coord.Hold
	var raw []byte
	opened := func() {
		during = eng.Containers()
		hd, _, err := coord.ReadHolds(d.Read)
		if err != nil || len(hd.Holds) != 1 {
			t.Errorf("holds %+v, %v", hd, err)
			return
		}
		hold = hd.Holds[0]
		raw, _ = os.ReadFile(filepath.Join(d.Path(), coord.HoldsFile))
	}
	_, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the step did not run: %v", err)
	}
	byName := map[string]enginetest.Container{}
	for _, c := range during {
		byName[c.Name] = c
	}
	changed, aside := byName["store.registry"], byName[lifecycle.HeldName("store.registry")]
	switch {
	case aside.ID != normal.ID || aside.Running || aside.Spec.Restart != "no":
		t.Errorf("aside during the step: %+v, want the normal one %s, stopped, restart no", aside, normal.ID)
	case changed.ID == normal.ID || !changed.Running || changed.Spec.Restart != normal.Spec.Restart:
		t.Errorf("under the name during the step: %+v, want a changed copy running with restart %s", changed, normal.Spec.Restart)
	case !slices.Contains(changed.Spec.Env, "A=read-only-value") || !slices.Contains(changed.Spec.Env, "B=kept"):
		t.Errorf("changed env %v, want A changed and B kept", changed.Spec.Env)
	case changed.Spec.Labels[lifecycle.LabelWindow] != hold.ID:
		t.Errorf("changed labels %v, want the window's id %s", changed.Spec.Labels, hold.ID)
	}
	want := coord.Changed{ID: changed.ID, Aside: normal.ID, Spec: SpecHash(normal.Spec.Labels[lifecycle.LabelSpec])}
	if got := hold.Changed["store.registry"]; got != want {
		t.Errorf("hold records %+v, want %+v", got, want)
	}
	if strings.Contains(string(raw), "read-only-value") || strings.Contains(string(raw), "normal\"") {
		t.Errorf("holds.json holds an env value: %s", raw)
	}
	checkBack(t, eng, normal)
	// The switch is a stop, then a start.
	var stopAt, startAt int
	for _, e := range eng.Events() {
		switch {
		case e.Op == enginetest.OpStop && e.Name == "store.registry" && stopAt == 0:
			stopAt = e.Seq
		case e.Op == enginetest.OpStart && e.Name == "store.registry" && stopAt != 0 && startAt == 0:
			startAt = e.Seq
		}
	}
	if stopAt == 0 || startAt < stopAt {
		t.Errorf("the normal one stopped at event %d, the changed one started at %d: want stop, then start", stopAt, startAt)
	}
}

// checkBack checks that normal, and only it, runs under its name with its
// restart policy.
func checkBack(t *testing.T, eng *enginetest.Fake, normal enginetest.Container) {
	t.Helper()
	after := eng.Containers()
	if len(after) != 1 || after[0].ID != normal.ID || after[0].Name != "store.registry" || !after[0].Running ||
		after[0].Spec.Restart != normal.Spec.Restart {
		t.Errorf("after the close: %+v, want only %s running as store.registry, restart %s", after, normal.ID, normal.Spec.Restart)
	}
}

// TestWindowChangedFailsItsGate: a changed copy that never becomes healthy
// is removed, the normal one comes back, the step does not run, and the
// window fails saying why.
func TestWindowChangedFailsItsGate(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	// Only a container with a healthcheck is judged by it: the changed one.
	eng.SetHealth(enginetest.Image, "unhealthy", "read-only mode refused")
	_, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}})
	var fe *FailedError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "the changed store.registry did not become healthy") {
		t.Fatalf("Run = %v, want the window failed, saying the changed one was not healthy", err)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the step ran")
	}
	checkBack(t, eng, normal)
	hd, _, err := coord.ReadHolds(d.Read)
	if err != nil || len(hd.Holds) != 0 {
		t.Errorf("holds after: %+v, %v", hd, err)
	}
}

// deferMidWindow is an apply of src during the one open window that
// defers the registry's change: it records src as applied and the
// registry as deferred in the window's hold.
func deferMidWindow(t *testing.T, d *state.Dir, src string) {
	t.Helper()
	f, err := mesh.Decode("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	recordApplied(t, d, f)
	hd, _, err := coord.ReadHolds(d.Read)
	if err != nil || len(hd.Holds) != 1 {
		t.Fatalf("holds %+v, %v", hd, err)
	}
	lock, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := coord.RecordDeferred(lock, map[string][]string{hd.Holds[0].ID: {"store.registry"}}); err != nil {
		t.Fatal(err)
	}
}

// TestWindowChangedCarriesOutDeferred: an apply changed the registry and
// deferred it during the window. The close removes the changed copy and
// brings the new version through the gate, not the one aside.
func TestWindowChangedCarriesOutDeferred(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	eng.SetHealth(enginetest.Image, "healthy", "")
	opened := func() { deferMidWindow(t, d, strings.Replace(changedYAML(ran), "B: kept", "B: new", 1)) }
	if _, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	after := eng.Containers()
	if len(after) != 1 || after[0].ID == normal.ID || !after[0].Running || !slices.Contains(after[0].Spec.Env, "B=new") ||
		!slices.Contains(after[0].Spec.Env, "A=normal") || after[0].Spec.Labels[lifecycle.LabelWindow] != "" {
		t.Errorf("after the close: %+v, want one new registry, B=new and A normal", after)
	}
}

// TestWindowChangedEditedMidWindow: an apply that edits while-changed
// mid-window changes the next window, not this one. The close removes the
// copy this window made and brings the same normal container back.
func TestWindowChangedEditedMidWindow(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	eng.SetHealth(enginetest.Image, "healthy", "")
	opened := func() {
		edited := strings.Replace(changedYAML(ran), "A: read-only-value", "A: other-value, C: more", 1)
		f, err := mesh.Decode("mesh.yaml", []byte(edited))
		if err != nil {
			t.Fatal(err)
		}
		recordApplied(t, d, f)
	}
	if _, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	checkBack(t, eng, normal)
}

// TestWindowChangedWithoutNormal: the registry was applied, then went
// missing. The open runs the changed copy from the applied spec, with
// nothing aside, and the close creates the normal one.
func TestWindowChangedWithoutNormal(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	eng.SetHealth(enginetest.Image, "healthy", "")
	if err := eng.Remove(context.Background(), normal.ID); err != nil {
		t.Fatal(err)
	}
	var during []enginetest.Container
	opened := func() { during = eng.Containers() }
	if _, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the step did not run: %v", err)
	}
	if len(during) != 1 || !slices.Contains(during[0].Spec.Env, "A=read-only-value") || !during[0].Running {
		t.Errorf("during the step: %+v, want the changed copy alone, running", during)
	}
	after := eng.Containers()
	if len(after) != 1 || after[0].ID == during[0].ID || !slices.Contains(after[0].Spec.Env, "A=normal") || !after[0].Running {
		t.Errorf("after the close: %+v, want a new normal registry alone, running", after)
	}
}

// TestWindowChangedDeferredFailsPutsBack: the change an apply deferred
// fails to start at the close. The normal container set aside is put back
// under its name, running, and the window fails saying so.
func TestWindowChangedDeferredFailsPutsBack(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	eng.SetHealth(enginetest.Image, "healthy", "")
	const broken = "meshtest/busybox:broken"
	eng.AddImages(broken)
	eng.FailStart(broken, true)
	opened := func() {
		deferMidWindow(t, d, strings.Replace(changedYAML(ran), "image: "+enginetest.Image, "image: "+broken, 1))
	}
	_, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}})
	if err == nil || !strings.Contains(err.Error(), "the old container was put back") {
		t.Fatalf("Run = %v, want the window failed, the old container put back", err)
	}
	checkBack(t, eng, normal)
}

// TestDryRunChanged: a dry run says the registry would be held changed
// and set aside. A NAME.meshctl-held left there would be put back first,
// as the real open's heal does. A container never applied is refused.
// Nothing is touched.
func TestDryRunChanged(t *testing.T) {
	d, eng, normal, _ := changedSetup(t)
	opts := Options{Module: "store", Step: "gc"}
	rep, err := DryRunOf(context.Background(), d, eng, opts)
	if err != nil || len(rep.Holds) != 1 || rep.Holds[0].Mode != ModeChanged ||
		!slices.Contains(rep.Reasons, "would set store.registry aside as store.registry.meshctl-held and run it changed until the close") {
		t.Fatalf("dry run %+v, %v", rep, err)
	}
	if _, err := eng.Create(context.Background(), lifecycle.HeldName("store.registry"), engine.Spec{Image: enginetest.Image,
		Labels: normal.Spec.Labels}); err != nil {
		t.Fatal(err)
	}
	rep, err = DryRunOf(context.Background(), d, eng, opts)
	if err != nil || rep.Verdict != VerdictRun ||
		!slices.Contains(rep.Reasons, "store.registry.meshctl-held is left by a window that is gone: would put it back first") {
		t.Errorf("dry run with a leftover aside: %+v, %v", rep, err)
	}
	if err := os.Remove(filepath.Join(d.Path(), "applied.json")); err != nil {
		t.Fatal(err)
	}
	f, err := mesh.Decode("mesh.yaml", []byte(changedYAML("ran")))
	if err != nil {
		t.Fatal(err)
	}
	opts.File = f
	rep, err = DryRunOf(context.Background(), d, eng, opts)
	if err == nil || rep.Verdict != VerdictFail || !strings.Contains(err.Error(), "store.registry was never applied") {
		t.Errorf("dry run of a container never applied: %+v, %v", rep, err)
	}
	if c, _ := eng.Get("store.registry"); c.ID != normal.ID || !c.Running {
		t.Errorf("the dry run touched the registry: %+v", c)
	}
}

// TestWindowChangedHealsALeftAside: a NAME.meshctl-held that no hold
// records, beside the service, is a leftover. The open's heal removes it,
// then holds the service changed as usual.
func TestWindowChangedHealsALeftAside(t *testing.T) {
	d, eng, normal, ran := changedSetup(t)
	eng.SetHealth(enginetest.Image, "healthy", "")
	if _, err := eng.Create(context.Background(), lifecycle.HeldName("store.registry"), engine.Spec{Image: enginetest.Image,
		Labels: normal.Spec.Labels}); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("the step did not run: %v", err)
	}
	checkBack(t, eng, normal)
}

// TestWindowChangedStopsFirstWhateverTheOrder holds changed a container
// that deploys start-first. Its switch is still a stop, then a start, for
// the two may share a port or a volume: the copy is created only once the
// normal one stopped, in the open and in the close.
func TestWindowChangedStopsFirstWhateverTheOrder(t *testing.T) {
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(changedYAML(filepath.Join(dir, "ran")), "env: {A: normal, B: kept}",
		"env: {A: normal, B: kept}\n        update-order: start-first\n        networks: [net]", 1)
	src = strings.Replace(src, "    containers:", "    networks: {net: {}}\n    containers:", 1)
	f, err := mesh.Decode("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.NewFake(enginetest.Image)
	eng.SetHealth(enginetest.Image, "healthy", "")
	applyFresh(t, d, eng, f)
	normal, _ := eng.Get("store.registry")
	if _, err := Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	checkBack(t, eng, normal)
	// Which of the service's containers run, by their name at each event.
	running := map[string]bool{"store.registry": true}
	for _, e := range eng.Events() {
		if e.Err != "" {
			continue
		}
		switch e.Op {
		case enginetest.OpStop, enginetest.OpKill:
			running[e.Name] = false
		case enginetest.OpRemove:
			delete(running, e.Name)
		case enginetest.OpRename:
			running[e.Arg] = running[e.Name]
			delete(running, e.Name)
		case enginetest.OpStart:
			for name, up := range running {
				if up && name != e.Name {
					t.Fatalf("event %d starts %s while %s still runs: want stop, then start", e.Seq, e.Name, name)
				}
			}
			running[e.Name] = true
		}
	}
}

// TestWindowChangedLeavesASwappedFileUnstarted: the registry's secret
// replaced by a FIFO as the open creates the changed copy. The changed copy, which binds the
// same file, is not started (it would run without the secret's content):
// the window fails naming the file and what is in its place, the step
// does not run, and nothing of the window runs.
func TestWindowChangedLeavesASwappedFileUnstarted(t *testing.T) {
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ran := filepath.Join(dir, "ran")
	src := strings.Replace(changedYAML(ran), "        env: {A: normal, B: kept}\n",
		"        env: {A: normal, B: kept}\n        secrets: [{name: token, file: "+secret+"}]\n", 1)
	f, err := mesh.Decode("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.NewFake(enginetest.Image)
	applyFresh(t, d, eng, f)
	eng.SetHealth(enginetest.Image, "healthy", "")
	// The swap lands as the open creates the changed copy: after the open
	// read the file, before the copy's start.
	var swapped error
	eng.Hook = func(op, target string) {
		if op == enginetest.OpCreate && swapped == nil {
			if swapped = os.Remove(secret); swapped == nil {
				swapped = syscall.Mkfifo(secret, 0o600)
			}
			if swapped == nil {
				swapped = errors.New("done")
			}
		}
	}
	before := len(eng.Events())
	_, err = Run(context.Background(), d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}})
	if swapped == nil || swapped.Error() != "done" {
		t.Fatalf("the secret was not swapped as the copy was created: %v", swapped)
	}
	var nr *lifecycle.FileNotRegularError
	if !errors.As(err, &nr) || !strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "a named pipe") {
		t.Fatalf("Run = %v, want a refusal naming %s and a named pipe", err, secret)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Error("the step ran")
	}
	for _, e := range eng.Events()[before:] {
		if e.Op == enginetest.OpStart && e.Err == "" {
			t.Errorf("the window started %s over a FIFO in its secret's place", e.Name)
		}
	}
	for _, c := range eng.Containers() {
		if c.Running {
			t.Errorf("%s (%s) runs over a FIFO in its secret's place", c.Name, c.ID)
		}
	}
}
