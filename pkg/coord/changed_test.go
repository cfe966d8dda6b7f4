package coord

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// serviceLabels are the labels of service m.c, with the window's id on a
// changed copy.
func serviceLabels(scope, window string) map[string]string {
	l := map[string]string{lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService,
		lifecycle.LabelModule: "m", lifecycle.LabelContainer: "c", lifecycle.LabelSpec: `{"image":"x"}`}
	if window != "" {
		l[lifecycle.LabelWindow] = window
	}
	return l
}

// deadChanged is a window that held m.c changed, killed at one instant of
// its open's switch or its close's. It sets up the engine as that instant
// left it and returns the hold, with the normal container's id.
type deadChanged struct {
	name string
	// stopped: the normal one stopped, restart no. aside: it is renamed
	// HeldName. copyAs: a changed copy is under the name, "" for none,
	// "created" or "running". recorded: the hold has the copy's id.
	stopped, aside bool
	copyAs         string
	recorded       bool
}

func (tc deadChanged) setUp(t *testing.T, eng *enginetest.Fake, scope string) Hold {
	t.Helper()
	ctx := context.Background()
	normal, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "always", Labels: serviceLabels(scope, "")})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx, normal); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h := Hold{ID: "w-1", Module: "m", Step: "s", PID: 1, Containers: []string{"m.c"},
		Restart: map[string]string{"m.c": "always"}, OpenedAt: now, Deadline: now.Add(time.Hour),
		Changed: map[string]Changed{"m.c": {Aside: normal, Spec: "sha256:00"}}}
	if tc.stopped {
		if err := eng.SetRestart(ctx, normal, "no"); err != nil {
			t.Fatal(err)
		}
		if err := eng.Stop(ctx, normal, time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if tc.aside {
		if err := eng.Rename(ctx, normal, lifecycle.HeldName("m.c")); err != nil {
			t.Fatal(err)
		}
	}
	if tc.copyAs != "" {
		id, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "always", Labels: serviceLabels(scope, "w-1")})
		if err != nil {
			t.Fatal(err)
		}
		if tc.copyAs == "running" {
			if err := eng.Start(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if tc.recorded {
			h.Changed["m.c"] = Changed{ID: id, Aside: normal, Spec: "sha256:00"}
		}
	}
	return h
}

// TestReleaseUnchangesADeadWindow: whatever instant of its switches a
// window holding m.c changed died at, the stale release leaves exactly one
// m.c: the normal one, under its name, running with its restart policy.
// No changed copy and no m.c.meshctl-held is left.
func TestReleaseUnchangesADeadWindow(t *testing.T) {
	for _, tc := range []deadChanged{
		{name: "hold recorded, nothing touched"},
		{name: "normal stopped", stopped: true},
		{name: "normal aside", stopped: true, aside: true},
		{name: "copy created, its id lost", stopped: true, aside: true, copyAs: "created"},
		{name: "copy created and recorded", stopped: true, aside: true, copyAs: "created", recorded: true},
		{name: "copy running", stopped: true, aside: true, copyAs: "running", recorded: true},
		{name: "close removed the copy", stopped: true, aside: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, eng := stateDir(t), enginetest.NewFake(busybox)
			scope, err := d.ID()
			if err != nil {
				t.Fatal(err)
			}
			h := tc.setUp(t, eng, scope)
			normalID := h.Changed["m.c"].Aside
			released := releaseHold(t, d, eng, scope, h)
			if released != 1 {
				t.Fatalf("released %d, want 1", released)
			}
			all := eng.Containers()
			if len(all) != 1 || all[0].ID != normalID || all[0].Name != "m.c" || !all[0].Running || all[0].Spec.Restart != "always" {
				t.Errorf("after the release: %+v, want only the normal m.c (%s), running, restart always", all, normalID)
			}
		})
	}
}

// releaseHold classifies h, of a dead window, and releases it.
func releaseHold(t *testing.T, d *state.Dir, eng engine.Client, scope string, h Hold) int {
	t.Helper()
	ctx := context.Background()
	hd := HoldsDoc{Holds: []Hold{h}}
	var observed []engine.Container
	classified, _, err := Liveness{Dir: d}.Classify(&hd, time.Now(), listSteps(ctx, eng, scope, &observed))
	if err != nil {
		t.Fatal(err)
	}
	lock, err := d.Lock(ctx, StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	w := &Windows{Holds: hd, Classified: classified, Observed: observed}
	n, err := ReleaseStale(ctx, lock, lifecycle.Executor{Engine: eng, Scope: scope}, w, noPolicies(), time.Now(), func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReleaseKeepsAnOrphanChanged: a dead window whose step container
// still runs is orphaned, so its hold stays. Its changed copy keeps running
// under the name, and the normal one stays aside.
func TestReleaseKeepsAnOrphanChanged(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	h := deadChanged{stopped: true, aside: true, copyAs: "running", recorded: true}.setUp(t, eng, scope)
	h.StepContainer = "meshctl-window.m.s"
	ctx := context.Background()
	step, err := eng.Create(ctx, h.StepContainer, engine.Spec{Image: busybox, Labels: map[string]string{
		lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleStep, lifecycle.LabelModule: "m"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx, step); err != nil {
		t.Fatal(err)
	}
	if n := releaseHold(t, d, eng, scope, h); n != 0 {
		t.Fatalf("released %d, want the orphaned hold kept", n)
	}
	cur, _ := eng.Get("m.c")
	aside, ok := eng.Get(lifecycle.HeldName("m.c"))
	if cur.ID != h.Changed["m.c"].ID || !cur.Running || !ok || aside.Running {
		t.Errorf("m.c %+v, aside %+v (%v): want the changed copy running and the normal one aside, stopped", cur, aside, ok)
	}
}

// TestHealPutsBackALeftHeld: a normal container set aside as
// m.c.meshctl-held that no hold records is put back by the heal, running
// with its spec's restart policy, whatever is under the name: a changed
// copy (removed), nothing, or the service (the one aside goes). One a hold
// records is left alone.
func TestHealPutsBackALeftHeld(t *testing.T) {
	for _, tc := range []struct {
		name     string
		under    string // "", "copy" or "service"
		mine     bool
		wantBack bool // the normal one is under the name, running
	}{
		{"a changed copy under the name", "copy", true, true},
		{"nothing under the name", "", true, true},
		{"the service under the name", "service", true, false},
		{"held", "copy", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			f := enginetest.NewFake(busybox)
			x := lifecycle.Executor{Engine: f, Scope: "s"}
			labels := serviceLabels("s", "")
			labels[lifecycle.LabelSpec] = `{"v":2,"image":"meshtest/busybox:1","restart":"always"}`
			normal, err := f.Create(ctx, lifecycle.HeldName("m.c"), engine.Spec{Image: busybox, Restart: "no", Labels: labels})
			if err != nil {
				t.Fatal(err)
			}
			if tc.under != "" {
				window := "w-1"
				if tc.under == "service" {
					window = ""
				}
				id, err := f.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "always", Labels: serviceLabels("s", window)})
				if err != nil {
					t.Fatal(err)
				}
				_ = f.Start(ctx, id)
			}
			observed, err := f.List(ctx, lifecycle.Managed("s"))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := healDead(ctx, x, observed, nil, func(string) bool { return tc.mine }, func(string, ...any) {}); err != nil {
				t.Fatal(err)
			}
			cur, _ := f.Get("m.c")
			_, asideThere := f.Get(lifecycle.HeldName("m.c"))
			back := cur.ID == normal && cur.Running && cur.Spec.Restart == "always"
			if back != tc.wantBack {
				t.Errorf("m.c %+v: normal one back: %v, want %v", cur, back, tc.wantBack)
			}
			if asideThere == tc.mine {
				t.Errorf("m.c.meshctl-held there: %v, want it there only when held", asideThere)
			}
			if tc.mine && len(f.Containers()) != 1 {
				t.Errorf("containers %+v, want one m.c", f.Containers())
			}
		})
	}
}

// TestUnchangeCopyCreatedAfterTheListing: a dead window's create of its
// changed copy was still in the engine when the listing was made. So the
// listing has no m.c, and the rename back finds the name taken. Unchange
// asks the engine, removes the copy and puts the normal one back.
func TestUnchangeCopyCreatedAfterTheListing(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	h := deadChanged{stopped: true, aside: true}.setUp(t, eng, scope)
	normalID := h.Changed["m.c"].Aside
	ctx := context.Background()
	listed, err := eng.List(ctx, lifecycle.Managed(scope))
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]engine.Container{}
	for _, c := range listed {
		byName[c.Name] = c
	}
	// The copy's create completes after the listing.
	if _, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "always", Labels: serviceLabels(scope, "w-1")}); err != nil {
		t.Fatal(err)
	}
	if err := Unchange(ctx, lifecycle.Executor{Engine: eng, Scope: scope}, "m.c", byName, h.Changed["m.c"], h.ID); err != nil {
		t.Fatalf("Unchange: %v", err)
	}
	all := eng.Containers()
	if len(all) != 1 || all[0].ID != normalID || all[0].Name != "m.c" {
		t.Errorf("after Unchange: %+v, want only the normal m.c (%s) under its name", all, normalID)
	}
}
