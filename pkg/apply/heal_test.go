package apply

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestApplyHealsAnInterruptedRecreate: an apply died in the health wait of
// a recreate (its claim dead, the old container aside, the new one
// unverified). The next apply puts the old one back and replaces it again
// through the health gate: nothing is left aside, and the unverified
// container is not taken for a converged one.
func TestApplyHealsAnInterruptedRecreate(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake("old:1", "new:1")
	diedInGate(t, d, f)

	rep, err := run(t, d, f, meshOf(t, "c: {image: new:1}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a := actions(rep); a["m.c"] != Recreate {
		t.Errorf("m.c: %s, want recreate (the unverified one is not taken as converged)", a["m.c"])
	}
	ch := f.Changes()
	want := []string{"remove m.c", "rename m.c.meshctl-old m.c", "start m.c"}
	if len(ch) < 3 || !slices.Equal(ch[:3], want) {
		t.Errorf("events %q, want first %q", ch, want)
	}
	if _, ok := f.Get("m.c.meshctl-old"); ok {
		t.Error("m.c.meshctl-old left aside")
	}
	if c, _ := f.Get("m.c"); !c.Running || c.Spec.Image != "new:1" {
		t.Errorf("m.c = %+v, want new:1 running", c)
	}
}

func desiredOf(t *testing.T, image string) *lifecycle.Desired {
	t.Helper()
	ds, err := record.Desire(meshOf(t, "c: {image: "+image+"}"), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &ds[0]
}

// TestApplyHealsARecreateKilledAtAnyInstant: an apply that died at any
// instant of a recreate (Executor.Recreate: the new one is made under
// m.c.meshctl-new before the old one stops) is healed by the next apply,
// and the old container, what last ran healthy, is what that apply puts
// back when the new version cannot start: the same container, running, and
// nothing else of the service left, whether the death left the new one
// created, started, or already under the name, and the old one running,
// stopped, or aside.
func TestApplyHealsARecreateKilledAtAnyInstant(t *testing.T) {
	for _, tt := range []struct {
		instant string
		// die brings the engine to the instant: old is the old container,
		// newID the new one, made under m.c.meshctl-new.
		die func(ctx context.Context, f *enginetest.Fake, oldID, newID string)
	}{
		{"new created", func(ctx context.Context, f *enginetest.Fake, oldID, newID string) {}},
		{"old stopped", func(ctx context.Context, f *enginetest.Fake, oldID, newID string) {
			f.Stop(ctx, oldID, 0)
		}},
		{"new started", func(ctx context.Context, f *enginetest.Fake, oldID, newID string) {
			f.Stop(ctx, oldID, 0)
			f.Start(ctx, newID)
		}},
		{"old aside", func(ctx context.Context, f *enginetest.Fake, oldID, newID string) {
			f.Stop(ctx, oldID, 0)
			f.Start(ctx, newID)
			f.Rename(ctx, oldID, "m.c.meshctl-old")
		}},
		{"new under the name", func(ctx context.Context, f *enginetest.Fake, oldID, newID string) {
			f.Stop(ctx, oldID, 0)
			f.Start(ctx, newID)
			f.Rename(ctx, oldID, "m.c.meshctl-old")
			f.Rename(ctx, newID, "m.c")
		}},
	} {
		t.Run(tt.instant, func(t *testing.T) {
			d := stateDir(t)
			f := enginetest.NewFake("old:1", "new:1", "bad:1")
			ctx := context.Background()
			if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
				t.Fatal(err)
			}
			l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h, err := coord.TakeClaim(l, coord.Claim{Containers: []string{"m.c"}}, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			l.Unlock()
			scope, _ := d.ID()
			old, _ := f.Get("m.c")
			newID, err := f.Create(ctx, "m.c.meshctl-new", desiredOf(t, "new:1").EngineSpec(scope))
			if err != nil {
				t.Fatal(err)
			}
			tt.die(ctx, f, old.ID, newID)
			h.Abandon()
			_, tmpLeft := f.Get("m.c.meshctl-new")
			f.Changes()

			// The healing apply asks for a version that cannot start: what
			// it leaves running is what it put back.
			f.FailStart("bad:1", true)
			rep, err := run(t, d, f, meshOf(t, "c: {image: bad:1}"), nil)
			if fe := (*FailedError)(nil); !errors.As(err, &fe) {
				t.Fatalf("the healing apply: %v, want it to fail on the version that cannot start", err)
			}
			if a := actions(rep); len(a) != 1 {
				t.Errorf("report rows %v, want m.c alone (the unverified new one healed away, not an orphan)", a)
			}
			// The unverified new one goes before anything starts: never
			// two copies of the service at once.
			if ch := f.Changes(); tmpLeft && (len(ch) == 0 || ch[0] != "remove m.c.meshctl-new") {
				t.Errorf("the healing apply's changes %q, want the removal of m.c.meshctl-new first", ch)
			}
			if c, ok := f.Get("m.c"); !ok || c.ID != old.ID || !c.Running {
				t.Errorf("m.c = %+v, want the old container %s running", c, old.ID)
			}
			if cs := f.Containers(); len(cs) != 1 {
				t.Errorf("containers left: %+v, want only the old m.c", cs)
			}
		})
	}
}

// diedInGate sets up what an apply of new:1 left when it was killed in the
// health wait of its recreate of m.c (old:1): its claim dead, the old one
// aside and stopped, the new one unverified and running. It returns the old
// container's id.
func diedInGate(t *testing.T, d *state.Dir, f *enginetest.Fake) string {
	t.Helper()
	ctx := context.Background()
	if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
		t.Fatal(err)
	}
	l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := coord.TakeClaim(l, coord.Claim{Containers: []string{"m.c"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	scope, _ := d.ID()
	old, _ := f.Get("m.c")
	f.Stop(ctx, old.ID, 0)
	f.Rename(ctx, old.ID, "m.c.meshctl-old")
	dn := desiredOf(t, "new:1")
	id, err := f.Create(ctx, "m.c", dn.EngineSpec(scope))
	if err != nil {
		t.Fatal(err)
	}
	f.Start(ctx, id)
	h.Abandon()
	f.Changes()
	return old.ID
}

// TestHealKeepsADeadClaimWhileHeld: a live window holds m.c, the
// unverified container an apply killed in its health gate left (its claim
// dead, the old one aside). An apply mid-window leaves m.c alone, and keeps
// the dead claim: once the window is gone (dead, its hold stale), the next
// apply puts the old one back. Dropping the claim lost the last good container for good.
func TestHealKeepsADeadClaimWhileHeld(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake("old:1", "new:1")
	oldID := diedInGate(t, d, f)
	win := liveWindow(t, d, "m.c", "always")
	if _, err := run(t, d, f, meshOf(t, "c: {image: new:1}"), nil); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Get("m.c.meshctl-old"); !ok {
		t.Fatal("the apply mid-window touched the held m.c's old container")
	}
	var doc coord.ClaimsDoc
	if _, err := d.Read(coord.ClaimsFile, &doc); err != nil || len(doc.Claims) != 1 || !slices.Equal(doc.Claims[0].Containers, []string{"m.c"}) {
		t.Fatalf("claims.json mid-window = %+v, %v; want the dead claim on m.c kept", doc, err)
	}
	win.Unlock() // the window dies: its hold is stale

	// The next apply releases the dead window's hold, which puts the old
	// one back (once that window's step container is gone), then replaces
	// it again through the gate.
	if _, err := run(t, d, f, meshOf(t, "c: {image: new:1}"), nil); err != nil {
		t.Fatal(err)
	}
	ch := f.Changes()
	if len(ch) < 2 || ch[0] != "remove m.c" || ch[1] != "rename m.c.meshctl-old m.c" {
		t.Errorf("events %q, want the unverified m.c removed and the old one renamed back first", ch)
	}
	if _, ok := f.Get("m.c.meshctl-old"); ok {
		t.Error("m.c.meshctl-old left aside")
	}
	if c, _ := f.Get("m.c"); !c.Running || c.Spec.Image != "new:1" || c.ID == oldID {
		t.Errorf("m.c = %+v, want new:1 running, recreated through the gate", c)
	}
	// The dead claim, whose container is back, goes with the apply after.
	if _, err := run(t, d, f, meshOf(t, "c: {image: new:1}"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Read(coord.ClaimsFile, &doc); err != nil || len(doc.Claims) != 0 {
		t.Errorf("claims.json after the heal = %+v, %v; want none", doc, err)
	}
}

// TestApplyRemovesALeftoverNew: a command that died left m.c.meshctl-new,
// a replacement created under its temporary name and never verified, with
// no live claim on it. The next apply removes it before it plans; the
// service itself is left as it is.
func TestApplyRemovesALeftoverNew(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake("old:1", "new:1")
	ctx := context.Background()
	if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
		t.Fatal(err)
	}
	scope, _ := d.ID()
	if _, err := f.Create(ctx, "m.c.meshctl-new", desiredOf(t, "new:1").EngineSpec(scope)); err != nil {
		t.Fatal(err)
	}
	old, _ := f.Get("m.c")
	rep, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Get("m.c.meshctl-new"); ok {
		t.Error("m.c.meshctl-new is still there")
	}
	if c, _ := f.Get("m.c"); c.ID != old.ID || !c.Running || actions(rep)["m.c"] != Unchanged {
		t.Errorf("m.c = %+v (%s), want the old one, unchanged, running", c, actions(rep)["m.c"])
	}
}

// TestPlanLeavesALateNewAlone: a replacement under its temporary name that
// the heal's listing did not see (the create of an apply that died, carried
// out by the engine after that listing) is no orphan: the recreate of its
// name removes it, else the next heal does. --prune leaves it too.
func TestPlanLeavesALateNewAlone(t *testing.T) {
	labels := func() map[string]string {
		return map[string]string{lifecycle.LabelManaged: "s", lifecycle.LabelModule: "m", lifecycle.LabelContainer: "c"}
	}
	d := desiredOf(t, "new:1")
	in := Input{Desired: []lifecycle.Desired{*d}, Scope: "s", Prune: true, Observed: []engine.Container{
		{ID: "1", Name: "m.c", Running: true, Labels: labels()},
		{ID: "2", Name: "m.c.meshctl-new", Labels: labels()},
	}}
	for _, it := range Plan(in) {
		if it.Name != "m.c" {
			t.Errorf("planned %s (%s): want m.c alone", it.Name, it.Action)
		}
	}
}

// TestClaimSaysWhatRan: the claim of a recreate names the container it
// replaces that ran, with the id of the one that ran (Claim.Ran), so that a
// heal after the apply's death can settle a stop or a start it left in
// flight; a container it creates is not in it.
func TestClaimSaysWhatRan(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake("old:1", "new:1")
	if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
		t.Fatal(err)
	}
	old, _ := f.Get("m.c")
	var seen coord.ClaimsDoc
	f.Hook = func(op, target string) {
		if op == enginetest.OpStop && len(seen.Claims) == 0 {
			if _, err := d.Read(coord.ClaimsFile, &seen); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := run(t, d, f, meshOf(t, "c: {image: new:1}", "e: {image: new:1}"), nil); err != nil {
		t.Fatal(err)
	}
	if len(seen.Claims) != 1 {
		t.Fatalf("claims while the old m.c stopped: %+v, want the apply's", seen)
	}
	if c := seen.Claims[0]; len(c.Ran) != 1 || c.Ran["m.c"] != old.ID {
		t.Errorf("the claim's Ran: %v, want m.c: %s (and not m.e, which it creates)", c.Ran, old.ID)
	}
}

// startRefused is an engine that refuses to start one container (its
// start hangs and is given up, or fails).
type startRefused struct {
	*enginetest.Fake
	id string
}

func (e *startRefused) Start(ctx context.Context, id string) error {
	if id == e.id {
		return errors.New("engine did not answer")
	}
	return e.Fake.Start(ctx, id)
}

// TestUnfinishedPutBackIsHealed: a recreate whose new container fails,
// and whose put-back then cannot start the old one again, leaves the last
// good version stopped under its name. Its apply keeps its claim on it
// (coord.HeldClaim.Keep), dead once the apply is gone, so that the next apply
// heals it: it starts the old one before it plans, and its own failed
// recreate puts it back running. Without the kept claim, the next apply
// found it stopped, replaced a stopped container, and its put-back left it
// stopped: the service stayed down (the fault harness's long run, seed
// 27069: a hang of the put-back's start, then SIGTERM).
func TestUnfinishedPutBackIsHealed(t *testing.T) {
	const bad = "meshtest/busybox:bad"
	d := stateDir(t)
	f := enginetest.NewFake("old:1", bad)
	f.FailStart(bad, true)
	if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
		t.Fatal(err)
	}
	old, _ := f.Get("m.c")
	if _, err := run(t, d, &startRefused{Fake: f, id: old.ID}, meshOf(t, "c: {image: "+bad+"}"), nil); err == nil {
		t.Fatal("the apply of a version that cannot start succeeded")
	}
	if c, _ := f.Get("m.c"); c.ID != old.ID || c.Running {
		t.Fatalf("m.c after the refused put-back: %+v, want the old one, stopped", c)
	}
	var doc coord.ClaimsDoc
	if _, err := d.Read(coord.ClaimsFile, &doc); err != nil || len(doc.Claims) != 1 || !slices.Equal(doc.Claims[0].Containers, []string{"m.c"}) ||
		doc.Claims[0].Ran["m.c"] != old.ID {
		t.Fatalf("claims after the refused put-back: %+v, %v; want the apply's kept on m.c, saying it ran", doc, err)
	}
	// The next apply of the same file: the new version fails again, and
	// the old one runs again.
	if _, err := run(t, d, f, meshOf(t, "c: {image: "+bad+"}"), nil); err == nil {
		t.Fatal("the healing apply of a version that cannot start succeeded")
	}
	if c, _ := f.Get("m.c"); c.ID != old.ID || !c.Running {
		t.Errorf("m.c after the next apply: %+v, want the old one running", c)
	}
	if _, err := d.Read(coord.ClaimsFile, &doc); err != nil || len(doc.Claims) != 0 {
		t.Errorf("claims after the next apply: %+v, %v; want none", doc, err)
	}
}

// liveWindow makes a live window w-1 of module m that holds container
// (its policy recorded for the close): its lock taken, its hold in the
// holds file. Unlocking the returned lock is the window's death.
func liveWindow(t *testing.T, d *state.Dir, container, policy string) *state.Lock {
	t.Helper()
	ctx := context.Background()
	win, err := d.Lock(ctx, coord.WindowLock("w-1"), state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	hd := coord.HoldsDoc{Holds: []coord.Hold{{ID: "w-1", Module: "m", Step: "s", PID: 1, Containers: []string{container},
		Restart: map[string]string{container: policy}, OpenedAt: now, Deadline: now.Add(time.Hour)}}}
	l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = l.Write(coord.HoldsFile, &hd)
	l.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return win
}

// TestClaimSaysWhatStartsFirst: the claim of a start-first recreate names
// it (Claim.StartsFirst), so that the heal after the apply's death leaves
// the old container running, as start-first promises. A stop-first
// recreate is not in it.
func TestClaimSaysWhatStartsFirst(t *testing.T) {
	file := func(v string) *mesh.File {
		t.Helper()
		f, err := mesh.Decode("mesh.yaml", []byte(`modules:
  m:
    networks: {net: {}}
    containers:
      c: {image: `+v+`, networks: [net], update-order: start-first}
      e: {image: `+v+`, networks: [net]}
`))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	d := stateDir(t)
	f := enginetest.NewFake("old:1", "new:1")
	if _, err := run(t, d, f, file("old:1"), nil); err != nil {
		t.Fatal(err)
	}
	var seen coord.ClaimsDoc
	f.Hook = func(op, target string) {
		if op == enginetest.OpCreate && len(seen.Claims) == 0 {
			if _, err := d.Read(coord.ClaimsFile, &seen); err != nil {
				t.Error(err)
			}
		}
	}
	if _, err := run(t, d, f, file("new:1"), nil); err != nil {
		t.Fatal(err)
	}
	if len(seen.Claims) != 1 || !slices.Equal(seen.Claims[0].StartsFirst, []string{"m.c"}) {
		t.Errorf("claims while the new ones were made: %+v, want m.c alone as starting first", seen)
	}
}
