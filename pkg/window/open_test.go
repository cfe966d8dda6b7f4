package window

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/engine/enginetest"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestOpenStopsWhatTheListingSaidWasStopped is the gap docs/model
// found (APPLY_START_IN_FLIGHT): an apply killed mid-recreate sent the start
// of a new container; the window's listing reads it stopped, and the engine
// carries the start out after the listing. The open stops every held
// container whatever the listing said, so it does not run during the step.
func TestOpenStopsWhatTheListingSaidWasStopped(t *testing.T) {
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	stepStart, stepEnd := filepath.Join(dir, "step-start"), filepath.Join(dir, "step-end")
	f, err := mesh.Decode("mesh.yaml", []byte(interleaveYAML(stepStart, stepEnd)))
	if err != nil {
		t.Fatal(err)
	}
	x := &interleave{d: d, eng: enginetest.NewFake(enginetest.Image), f: f}
	ctx := context.Background()
	if _, err := x.apply(ctx); err != nil {
		t.Fatal(err)
	}
	// The container reads stopped, as a new one that was created and whose
	// start is still in the engine reads "created".
	if err := x.eng.Stop(ctx, "store.registry", time.Second); err != nil {
		t.Fatal(err)
	}
	// The engine carries the start out once the window has listed.
	var once sync.Once
	x.eng.Hook = func(op, target string) {
		if op == enginetest.OpRestart && target == "store.registry" {
			once.Do(func() {
				if err := x.eng.Start(ctx, "store.registry"); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if _, err := Run(ctx, d, x.eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	began := readNanos(t, stepStart)
	// The registry's last start before the step, and a stop after it.
	var startAt, stopAt time.Time
	for _, e := range x.eng.Events() {
		if e.Name != "store.registry" || e.Err != "" || !e.At.Before(began) {
			continue
		}
		switch e.Op {
		case enginetest.OpStart:
			startAt, stopAt = e.At, time.Time{}
		case enginetest.OpStop:
			stopAt = e.At
		}
	}
	if startAt.IsZero() {
		t.Fatal("the engine's start in flight was not carried out before the step")
	}
	if stopAt.IsZero() {
		t.Fatalf("store.registry ran while the step ran: started at %s and not stopped before the step began at %s; events: %+v",
			startAt.Format(time.StampMicro), began.Format(time.StampMicro), x.eng.Events())
	}
}
