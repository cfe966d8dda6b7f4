package window

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
)

func dependentYAML(color string) string {
	return `
modules:
  dh:
    containers:
      db:
        image: db:1
      app:
        image: ` + enginetest.Image + `
        env: {COLOR: ` + color + `}
        depends-on: [db]
    steps:
      gc:
        while-stopped: [db]
        exec: ["true"]
`
}

// TestCloseLeavesADependentWhoseDependencyIsNotBack: an apply deferred a
// change to dh.app, which depends on the held dh.db. The close cannot
// start db again. So app is not touched: its change waits for the next
// apply, and the window fails, saying why.
func TestCloseLeavesADependentWhoseDependencyIsNotBack(t *testing.T) {
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image, "db:1")
	applyFresh(t, d, eng, decode(t, dependentYAML("blue")))
	before, _ := eng.Get("dh.app")
	opened := func() {
		// The apply mid-window, and an engine that will not start db.
		recordDeferred(t, d, "dh", "dh.app")
		recordApplied(t, d, decode(t, dependentYAML("green")))
		eng.FailStart("db:1", true)
	}
	_, err := Run(context.Background(), d, eng, Options{Module: "dh", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}})
	if err == nil || !strings.Contains(err.Error(), "dh.app: not touched: dependency dh.db is not back") {
		t.Errorf("window: %v, want it failed, app not touched as db is not back", err)
	}
	if app, ok := eng.Get("dh.app"); !ok || app.ID != before.ID || !app.Running {
		t.Errorf("dh.app after the window: %+v, want the same container (%s) running", app, before.ID)
	}
}

// TestCloseLeavesADependentAnApplyIsChanging: an apply that began before
// the window opened still claims dh.app at the close. The close does not
// change app beside it. The change is left to that apply and the next.
func TestCloseLeavesADependentAnApplyIsChanging(t *testing.T) {
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image, "db:1")
	applyFresh(t, d, eng, decode(t, dependentYAML("blue")))
	before, _ := eng.Get("dh.app")
	var progress strings.Builder
	opened := func() {
		recordDeferred(t, d, "dh", "dh.app")
		recordApplied(t, d, decode(t, dependentYAML("green")))
		l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Unlock()
		c, err := coord.TakeClaim(l, coord.Claim{Containers: []string{"dh.app"}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Abandon)
	}
	_, err := Run(context.Background(), d, eng, Options{Module: "dh", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute},
		Progress: func(format string, args ...any) { fmt.Fprintf(&progress, format, args...) }})
	if err != nil {
		t.Fatal(err)
	}
	if app, ok := eng.Get("dh.app"); !ok || app.ID != before.ID {
		t.Errorf("dh.app after the window: %+v, want the same container (%s): an apply claims it", app, before.ID)
	}
	if !strings.Contains(progress.String(), "dh.app: apply (pid") {
		t.Errorf("the close said %q, want it to name the apply that changes dh.app", progress.String())
	}
}
