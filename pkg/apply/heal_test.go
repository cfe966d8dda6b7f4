package apply

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/applied"
	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine/enginetest"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/lifecycle"
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
	ctx := context.Background()
	if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
		t.Fatal(err)
	}
	// The dying apply: claimed m.c, moved the old one aside, created and
	// started the new one, and was killed while waiting for it.
	l, err := d.Lock(ctx, holds.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := claims.Take(l, []string{"m.c"}, time.Now())
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
	ds, err := applied.Desire(meshOf(t, "c: {image: "+image+"}"), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &ds[0]
}
