package window

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/state"
)

func recheckYAML(env string) string {
	return `
modules:
  rc:
    containers:
      web:
        image: ` + enginetest.Image + `
        env: {V: "` + env + `"}
    steps:
      gc:
        while-stopped: [web]
        exec: ["true"]
`
}

// TestCloseRechecksUnderTheLock: an apply deferred a change to the held
// rc.web while the close was bringing it back (after the close read the
// applied state, before it took the state lock to drop the hold). The
// close's re-check under the lock sees it and carries it out before the
// hold goes: rc.web runs the newer spec. Without the re-check the change
// is lost with the hold (a close without it once passed the whole suite).
func TestCloseRechecksUnderTheLock(t *testing.T) {
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image)
	applyFresh(t, d, eng, decode(t, recheckYAML("1")))
	var once sync.Once
	eng.Hook = func(op, target string) {
		if op == enginetest.OpStart && target != "" {
			// The close starts rc.web again: an apply records a change to it now.
			once.Do(func() {
				recordDeferred(t, d, "rc", "rc.web")
				recordApplied(t, d, decode(t, recheckYAML("2")))
			})
		}
	}
	ctx := context.Background()
	if _, err := Run(ctx, d, eng, Options{Module: "rc", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	c, ok := eng.Get("rc.web")
	if !ok || !c.Running || !slices.Contains(c.Spec.Env, "V=2") {
		t.Errorf("rc.web after the window: %+v, want the change the apply deferred meanwhile (V=2) running", c)
	}
}

func dependsYAML() string {
	return `
modules:
  dep:
    containers:
      app:
        image: ` + enginetest.Image + `
        depends-on: [db]
      db:
        image: ` + enginetest.Image + `
    steps:
      gc:
        while-stopped: [app, db]
        exec: ["true"]
`
}

// TestCloseBringsBackInDependsOnOrder: a window holds dep.app, which
// depends on dep.db, and names app first. The close starts db before app
// (a close ignoring depends-on order once passed the whole suite).
func TestCloseBringsBackInDependsOnOrder(t *testing.T) {
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image)
	applyFresh(t, d, eng, decode(t, dependsYAML()))
	eng.Changes()
	if _, err := Run(context.Background(), d, eng, Options{Module: "dep", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	changes := eng.Changes()
	app, db := slices.Index(changes, "start dep.app"), slices.Index(changes, "start dep.db")
	if app < 0 || db < 0 || app < db {
		t.Errorf("close events %q: want dep.db started before dep.app, which depends on it", changes)
	}
}
