package coord

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// deadWindowMidStart sets up what a window SIGKILLed while the engine
// carried out the start of its run: step container leaves: the held
// container m.c stopped with restart policy "no", the step container
// created but not (yet) running, and the window's hold, stale by its free
// lock and the listing. It returns the hold classified and the listing.
func deadWindowMidStart(t *testing.T, d *state.Dir, eng engine.Client, scope string) (HoldsDoc, []Classified, []engine.Container) {
	t.Helper()
	ctx := context.Background()
	svc, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "no", Labels: map[string]string{
		lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService, lifecycle.LabelModule: "m", lifecycle.LabelContainer: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = svc
	const step = "meshctl-window.m.s"
	if _, err := eng.Create(ctx, step, engine.Spec{Image: busybox, Labels: map[string]string{
		lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleStep, lifecycle.LabelModule: "m"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	hd := HoldsDoc{Holds: []Hold{{ID: "w-1", Module: "m", Step: "s", PID: 1, Containers: []string{"m.c"},
		Restart: map[string]string{"m.c": "always"}, OpenedAt: now, Deadline: now.Add(time.Hour), StepContainer: step}}}
	var observed []engine.Container
	classified, _, err := Liveness{Dir: d}.Classify(&hd, now, listSteps(ctx, eng, scope, &observed))
	if err != nil || len(classified) != 1 || classified[0].State != Stale {
		t.Fatalf("classified %+v, %v; want the hold stale", classified, err)
	}
	return hd, classified, observed
}

// TestReleaseRemovesTheStepFirst: a dead window's step container that reads
// created may be a start the window sent just before it died, which the
// engine still carries out. So the stale release removes it before the held
// container comes back: once the remove has returned, the sweep can neither
// run nor start (the engine does a container's start and remove one after
// the other). Found by docs/model/window.pml with START_IN_FLIGHT.
func TestReleaseRemovesTheStepFirst(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	hd, classified, observed := deadWindowMidStart(t, d, eng, scope)
	stepThere := false
	eng.Hook = func(op, target string) {
		if op == enginetest.OpStart && target == "m.c" {
			_, stepThere = eng.Get("meshctl-window.m.s")
		}
	}
	lock, err := d.Lock(context.Background(), StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	w := &Windows{Holds: hd, Classified: classified, Observed: observed}
	n, err := ReleaseStale(context.Background(), lock, lifecycle.Executor{Engine: eng, Scope: scope}, w, noPolicies(), time.Now(), func(string, ...any) {})
	if err != nil || n != 1 || !runs(w.Observed, "m.c") {
		t.Fatalf("release: %d released, %+v, %v", n, w.Observed, err)
	}
	if stepThere {
		t.Error("m.c was started while the dead window's step container was still there, able to start")
	}
	if _, ok := eng.Get("meshctl-window.m.s"); ok {
		t.Error("the dead window's step container is still there")
	}
	if c, _ := eng.Get("m.c"); !c.Running || c.Spec.Restart != "always" {
		t.Errorf("m.c after the release: %+v, want running, restart always", c)
	}
}

// removeFails is an engine whose Remove fails.
type removeFails struct{ *enginetest.Fake }

func (e removeFails) Remove(context.Context, string) error { return errors.New("engine says no") }

// TestReleaseKeepsTheHoldWhenTheStepStays: a dead window's step container
// that cannot be removed may still start: nothing is brought back, the
// release fails and its caller writes nothing, so the hold stays (fail
// closed).
func TestReleaseKeepsTheHoldWhenTheStepStays(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	eng := removeFails{fake}
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	hd, classified, observed := deadWindowMidStart(t, d, eng, scope)
	lock, err := d.Lock(context.Background(), StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := lock.Write(HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	w := &Windows{Holds: hd, Classified: classified, Observed: observed}
	_, err = ReleaseStale(context.Background(), lock, lifecycle.Executor{Engine: eng, Scope: scope}, w, noPolicies(), time.Now(), func(string, ...any) {})
	if err == nil {
		t.Fatal("release succeeded with the step container still there")
	}
	if c, _ := fake.Get("m.c"); c.Running {
		t.Error("m.c was started with the dead window's step container still there")
	}
	var onDisk HoldsDoc
	if _, err := d.Read(HoldsFile, &onDisk); err != nil || len(onDisk.Holds) != 1 {
		t.Errorf("holds file: %+v, %v; want the hold still there", onDisk, err)
	}
}

const busybox = "meshtest/busybox:1"

func stateDir(t testing.TB) *state.Dir {
	t.Helper()
	d, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func noPolicies() map[string]string { return map[string]string{} }

// runs reports whether the listing has name running.
func runs(observed []engine.Container, name string) bool {
	for _, c := range observed {
		if c.Name == name {
			return c.Running
		}
	}
	return false
}

// TestReleasePutsBackADeadClosesRecreate: a window killed in its close's
// recreate of m.c (a change an apply deferred) left the held container
// stopped with restart policy "no", under its name or aside as
// m.c.meshctl-old, and perhaps an unverified new one, running, under the
// name or under its temporary name m.c.meshctl-new (the recreate starts it
// before the renames). The release of its stale hold removes the new one
// before the held one starts, and puts the held one back under its name,
// running with its policy (the CI's fault run once saw the held one started
// beside a running m.c.meshctl-new).
func TestReleasePutsBackADeadClosesRecreate(t *testing.T) {
	for _, tc := range []struct {
		name         string
		oldAs, newAs string // "" for none
		oldRuns      bool
	}{
		{"before-create", "m.c.meshctl-old", "", false},
		{"in-gate", "m.c.meshctl-old", "m.c", false},
		{"started-before-renames", "m.c", "m.c.meshctl-new", false},
		{"started-between-renames", "m.c.meshctl-old", "m.c.meshctl-new", false},
		// A start-first recreate (the close's second round, of a C its
		// first round started) died after its renames: the old one
		// retires, running, and the new one is under the name.
		{"start-first-retiring", "m.c.meshctl-retiring", "m.c", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, eng := stateDir(t), enginetest.NewFake(busybox, "new:1")
			ctx := context.Background()
			scope, err := d.ID()
			if err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService, lifecycle.LabelModule: "m", lifecycle.LabelContainer: "c"}
			oldID, err := eng.Create(ctx, tc.oldAs, engine.Spec{Image: busybox, Restart: "no", Labels: labels})
			if err != nil {
				t.Fatal(err)
			}
			if tc.oldRuns {
				_ = eng.Start(ctx, oldID)
			}
			newID := ""
			if tc.newAs != "" {
				if newID, err = eng.Create(ctx, tc.newAs, engine.Spec{Image: "new:1", Restart: "always", Labels: labels}); err != nil {
					t.Fatal(err)
				}
				_ = eng.Start(ctx, newID)
			}
			beside := false
			eng.Hook = func(op, target string) {
				if op != enginetest.OpStart || newID == "" {
					return
				}
				if c, ok := eng.Get("m.c"); ok && c.ID == oldID && (target == "m.c" || target == oldID) {
					for _, n := range []string{"m.c", "m.c.meshctl-new"} {
						if o, ok := eng.Get(n); ok && o.ID == newID && o.Running {
							beside = true
						}
					}
				}
			}
			w := releaseDeadHold(t, d, eng, scope)
			if beside {
				t.Error("the held m.c was started while the unverified new one ran")
			}
			c, ok := eng.Get("m.c")
			if !ok || c.ID != oldID || !c.Running || c.Spec.Restart != "always" {
				t.Errorf("m.c after the release: %+v, want the held one (%s) running, restart always", c, oldID)
			}
			for _, n := range []string{"m.c.meshctl-old", "m.c.meshctl-new", "m.c.meshctl-retiring"} {
				if _, ok := eng.Get(n); ok {
					t.Errorf("%s is still there", n)
				}
			}
			if !runs(w.Observed, "m.c") || len(w.Observed) != 1 {
				t.Errorf("observed after the release: %+v, want m.c alone, running", w.Observed)
			}
		})
	}
}

// TestReleaseFinishesADeadWindowsStop: a window killed while the engine
// stopped a held container leaves that stop to finish without it: m.c still
// reads running, with the restart policy "no" the window set. The release
// stops it first (which waits for the stop in flight), then starts it: a
// plain start of a running container would be a no-op, and the stop in
// flight would then leave it stopped for good (a release without its
// settle stop once passed the whole suite).
func TestReleaseFinishesADeadWindowsStop(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	ctx := context.Background()
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	id, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "no", Labels: map[string]string{
		lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService, lifecycle.LabelModule: "m", lifecycle.LabelContainer: "c"}})
	if err == nil {
		err = eng.Start(ctx, id)
	}
	if err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	releaseDeadHold(t, d, eng, scope)
	stop, start := -1, -1
	changes := eng.Changes()
	for i, ch := range changes {
		switch ch {
		case "stop m.c":
			stop = i
		case "start m.c":
			start = i
		}
	}
	if stop < 0 || start < stop {
		t.Errorf("release events %q: want m.c stopped (the dead window's stop seen through), then started", changes)
	}
}

// releaseDeadHold releases, as an apply would, the stale hold of a dead
// window w-1 on m.c (its process gone, its lock free), and returns the
// windows with their listing updated by the release.
func releaseDeadHold(t *testing.T, d *state.Dir, eng engine.Client, scope string) *Windows {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	hd := HoldsDoc{Holds: []Hold{{ID: "w-1", Module: "m", Step: "s", PID: 1, Containers: []string{"m.c"},
		Restart: map[string]string{"m.c": "always"}, OpenedAt: now, Deadline: now.Add(time.Hour)}}}
	var observed []engine.Container
	classified, _, err := Liveness{Dir: d}.Classify(&hd, now, listSteps(ctx, eng, scope, &observed))
	if err != nil || len(classified) != 1 || classified[0].State != Stale {
		t.Fatalf("classified %+v, %v; want the hold stale", classified, err)
	}
	lock, err := d.Lock(ctx, StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	w := &Windows{Holds: hd, Classified: classified, Observed: observed}
	if n, err := ReleaseStale(ctx, lock, lifecycle.Executor{Engine: eng, Scope: scope}, w, noPolicies(), now, func(string, ...any) {}); err != nil || n != 1 {
		t.Fatalf("release: %d released, %v", n, err)
	}
	return w
}
