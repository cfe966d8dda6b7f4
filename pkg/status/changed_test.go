package status

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestChangedHoldReadsWorking: a registry held read-only at 03:31 reads as
// working. Its changed copy is held changed by the window, and the normal
// one aside is part of the hold, not a problem for --check.
func TestChangedHoldReadsWorking(t *testing.T) {
	fx := newFixture(t, meshYAML)
	h := coord.Hold{ID: "w-20260301T033002-abcdef", Module: "store", Step: "gc", PID: 4242,
		Containers: []string{"store.registry"}, OpenedAt: t0, Deadline: t0.Add(time.Hour),
		Changed: map[string]coord.Changed{"store.registry": {ID: "id-copy", Aside: "id-store.registry"}}}
	fx.write(t, coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{h}})
	l, err := fx.d.Lock(context.Background(), coord.WindowLock(h.ID), state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	aside := fx.service("store.registry", false)
	aside.Name = lifecycle.HeldName("store.registry")
	copyOf := fx.service("store.registry", true)
	copyOf.ID = "id-copy"
	eng := &fakeEngine{containers: []engine.Container{copyOf, aside, fx.service("store.web", true)}}
	rep := get(t, fx, eng, t0.Add(time.Minute))
	want := map[string]string{
		"store.registry":              "changed by window " + h.ID + " store/gc open",
		"store.registry.meshctl-held": "the normal store.registry, aside while window " + h.ID + " store/gc open holds it changed",
	}
	for _, c := range rep.Containers {
		if w, ok := want[c.Name]; ok && (c.State != Held || c.Window != h.ID || len(c.Reasons) != 1 || c.Reasons[0] != w) {
			t.Errorf("%s: %+v, want held by %s: %s", c.Name, c, h.ID, w)
		}
	}
	if !strings.HasPrefix(rep.Summary, "working: ") || len(rep.Problems) != 0 {
		t.Errorf("summary %q, problems %q", rep.Summary, rep.Problems)
	}
	if len(rep.Windows) != 1 || !strings.Contains(rep.Windows[0].Describe(), "holds store.registry (changed)") {
		t.Errorf("windows %+v", rep.Windows)
	}
}

// TestLeftHeldIsAProblem: a normal container aside that no hold records
// is a problem for --check, saying that the next apply puts it back.
func TestLeftHeldIsAProblem(t *testing.T) {
	fx := newFixture(t, meshYAML)
	aside := fx.service("store.registry", false)
	aside.Name = lifecycle.HeldName("store.registry")
	eng := &fakeEngine{containers: []engine.Container{aside, fx.service("store.web", true)}}
	rep := get(t, fx, eng, t0)
	want := "container store.registry.meshctl-held is stopped, set aside by a window that held store.registry changed and holds it no more; meshctl apply --last puts it back"
	if !slices.Contains(rep.Problems, want) || !strings.HasPrefix(rep.Summary, "attention: ") {
		t.Errorf("summary %q, problems %q; want %q", rep.Summary, rep.Problems, want)
	}
}
