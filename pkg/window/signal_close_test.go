package window

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestSignalledCloseLeavesADeferredChange: an apply deferred a change to
// the held rc.web during the window, then the window is signalled. Its
// close starts the same container again, bounded (lifecycle.SignalGrace),
// and leaves the change, with its health gate of up to minutes, to the next
// apply: a signalled command ends within seconds of cleaning up what it can
// (the fault harness's engine call that hangs during a signal).
func TestSignalledCloseLeavesADeferredChange(t *testing.T) {
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image)
	applyFresh(t, d, eng, decode(t, recheckYAML("1")))
	before, _ := eng.Get("rc.web")
	ctx, signal := context.WithCancel(context.Background())
	defer signal()
	opened := func() {
		recordApplied(t, d, decode(t, recheckYAML("2"))) // the apply mid-window
		recordDeferred(t, d, "rc", "rc.web")
		signal()
	}
	_, err := Run(ctx, d, eng, Options{Module: "rc", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}})
	var fe *FailedError
	if !errors.As(err, &fe) || !fe.Interrupted {
		t.Fatalf("window: %v, want it interrupted", err)
	}
	c, ok := eng.Get("rc.web")
	if !ok || c.ID != before.ID || !c.Running || !slices.Contains(c.Spec.Env, "V=1") {
		t.Errorf("rc.web after the signalled window: %+v, want the same container (%s) running as it was", c, before.ID)
	}
}
