package window

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

const stepRunYAML = `
modules:
  m:
    containers:
      app:
        image: meshtest/busybox:1
    steps:
      daemon:
        while-stopped: [app]
        timeout: 30s
        exec: [/bin/sh, -c, "sleep 600 & echo started"]
      missing:
        while-stopped: [app]
        exec: [/no/such/program, --all]
      unobtainable:
        while-stopped: [app]
        run:
          image: 127.0.0.1:1/nope:1
          command: [gc]
      pullable:
        while-stopped: [app]
        timeout: 1s # the fake's step container runs until killed
        run:
          image: gc:1
          command: [gc]
`

// stepRunFixture is a state directory with stepRunYAML applied to a fake
// engine: m.app runs.
func stepRunFixture(t *testing.T) (*state.Dir, *enginetest.Fake, *mesh.File) {
	t.Helper()
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image)
	f := decode(t, stepRunYAML)
	applyFresh(t, d, eng, f)
	if c, ok := eng.Get("m.app"); !ok || !c.Running {
		t.Fatalf("m.app after the apply: %+v", c)
	}
	eng.Changes() // what the apply did is not the window's
	return d, eng, f
}

// TestWindowCronBackgroundChild: a window under -q (the
// step's output kept in a Tail, not a file) whose step exits leaving a child
// that holds its output closes when the step exits, not at its timeout.
func TestWindowCronBackgroundChild(t *testing.T) {
	d, eng, f := stepRunFixture(t)
	kept := NewTail(256 << 10)
	start := time.Now()
	entry, err := Run(context.Background(), d, eng, Options{Module: "m", Step: "daemon", File: f, StepOutput: kept,
		Lock: state.LockOptions{Timeout: time.Minute}})
	if took := time.Since(start); took > outputDrain+5*time.Second {
		t.Errorf("the window took %s: it waited for the step's child", took)
	}
	if err != nil || entry == nil || entry.Result != ResultOK {
		t.Fatalf("entry %+v, err %v", entry, err)
	}
	if out, _ := kept.Bytes(); string(out) != "started\n" {
		t.Errorf("kept %q", out)
	}
	if c, _ := eng.Get("m.app"); !c.Running {
		t.Error("m.app does not run again")
	}
	var hd coord.HoldsDoc
	if _, err := d.Read(coord.HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	if len(hd.Holds) != 0 {
		t.Errorf("holds left: %+v", hd.Holds)
	}
}

// TestWindowStepCheckedBeforeOpen: a step that cannot run
// is refused before anything is stopped; a run: image that is missing but
// pullable is pulled before anything is stopped.
func TestWindowStepCheckedBeforeOpen(t *testing.T) {
	d, eng, f := stepRunFixture(t)
	run := func(step string) error {
		_, err := Run(context.Background(), d, eng, Options{Module: "m", Step: step, File: f, Lock: state.LockOptions{Timeout: time.Minute}})
		return err
	}

	err := run("missing")
	var u *fault.Error
	if !errors.As(err, &u) || u.Kind != fault.BadInput || !strings.Contains(err.Error(), "/no/such/program") {
		t.Errorf("exec: program missing: %v (%T), want bad input naming it", err, err)
	}
	if ch := eng.Changes(); len(ch) != 0 {
		t.Errorf("exec: program missing: the engine was changed: %v", ch)
	}

	err = run("unobtainable")
	if err == nil || errors.As(err, &u) || !strings.Contains(err.Error(), "image 127.0.0.1:1/nope:1 cannot be had") ||
		!strings.Contains(err.Error(), "nothing was stopped") {
		t.Errorf("image that cannot be had: %v (%T)", err, err)
	}
	for _, ch := range eng.Changes() {
		if !strings.HasPrefix(ch, enginetest.OpPull+" ") {
			t.Errorf("image that cannot be had: the engine was changed: %s", ch)
		}
	}
	if c, _ := eng.Get("m.app"); !c.Running {
		t.Error("m.app was stopped")
	}
	var hd coord.HoldsDoc
	if _, err := d.Read(coord.HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	if len(hd.Holds) != 0 {
		t.Errorf("holds recorded: %+v", hd.Holds)
	}

	eng.SetPullable("gc:1", true)
	if err := run("pullable"); err != nil && !strings.Contains(err.Error(), "killed after its timeout") {
		t.Fatalf("pullable image: %v", err)
	}
	pulled, stopped := -1, -1
	for i, e := range eng.Events() {
		switch {
		case e.Op == enginetest.OpPull && e.Name == "gc:1" && pulled < 0:
			pulled = i
		case e.Op == enginetest.OpStop && e.Name == "m.app" && stopped < 0 && pulled >= 0:
			stopped = i
		}
	}
	if pulled < 0 || stopped < 0 {
		t.Errorf("pullable image: pull at event %d, stop at %d; want a pull, then a stop: %v", pulled, stopped, eng.Events())
	}
}
