package apply_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
)

// interleaveYAML is a host of two modules. Step store/gc holds the registry
// and writes to the files its arguments name when it started and when it
// ended (nanoseconds since the epoch); step other/gc holds web and does
// nothing.
func interleaveYAML(stepStart, stepEnd string) string {
	return fmt.Sprintf(`
modules:
  store:
    containers:
      registry:
        image: %[1]s
    steps:
      gc:
        while-stopped: [registry]
        exec: [/bin/sh, -c, 'date +%%s%%N > "$0"; sleep 0.2; date +%%s%%N > "$1"', %[2]q, %[3]q]
  other:
    containers:
      web:
        image: %[1]s
    steps:
      gc:
        while-stopped: [web]
        exec: ["true"]
`, enginetest.Image, stepStart, stepEnd)
}

// stopGate holds the fake engine's Stop of one container, as a graceful
// stop that takes the container's whole stop timeout: until released, or
// for at most max when max is not zero.
type stopGate struct {
	name        string
	max         time.Duration
	entered     chan struct{} // closed when the Stop began
	release     chan struct{}
	enterOnce   sync.Once
	releaseOnce sync.Once
}

func newStopGate(name string, max time.Duration) *stopGate {
	return &stopGate{name: name, max: max, entered: make(chan struct{}), release: make(chan struct{})}
}

// hook is the fake engine's Hook.
func (g *stopGate) hook(op, target string) {
	if op != enginetest.OpStop || target != g.name {
		return
	}
	g.enterOnce.Do(func() { close(g.entered) })
	if g.max == 0 {
		<-g.release
		return
	}
	select {
	case <-g.release:
	case <-time.After(g.max):
	}
}

func (g *stopGate) open() { g.releaseOnce.Do(func() { close(g.release) }) }

// outcome is what a Run returned.
type outcome[T any] struct {
	v   T
	err error
}

// interleave is a host where window A, on module store, is stuck in the
// Stop of store.registry.
type interleave struct {
	d                  *state.Dir
	eng                *enginetest.Fake
	f                  *mesh.File
	gate               *stopGate
	stepStart, stepEnd string
	// baseline is the number of engine events before window A opened.
	baseline int
	aDone    chan outcome[*coord.Entry]
	// wg counts the goroutines the test started, awaited before the state
	// directory goes.
	wg sync.WaitGroup
}

// startInterleave applies the two-module file, then opens window A on
// store/gc in the background and returns once A's hold is recorded and its
// Stop of store.registry has begun (and is held by the gate, for stopFor or
// until released when stopFor is 0).
func startInterleave(tb testing.TB, stopFor time.Duration) *interleave {
	tb.Helper()
	dir := tb.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		tb.Fatal(err)
	}
	x := &interleave{d: d, eng: enginetest.NewFake(enginetest.Image), gate: newStopGate("store.registry", stopFor),
		stepStart: filepath.Join(dir, "step-start"), stepEnd: filepath.Join(dir, "step-end"),
		aDone: make(chan outcome[*coord.Entry], 1)}
	if x.f, err = mesh.Decode("mesh.yaml", []byte(interleaveYAML(x.stepStart, x.stepEnd))); err != nil {
		tb.Fatal(err)
	}
	if _, err := x.apply(context.Background()); err != nil {
		tb.Fatal(err)
	}
	x.baseline = len(x.eng.Events())
	x.eng.Hook = x.gate.hook
	tb.Cleanup(func() {
		x.gate.open()
		x.wg.Wait()
	})
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		e, err := window.Run(context.Background(), x.d, x.eng, window.Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}})
		x.aDone <- outcome[*coord.Entry]{e, err}
	}()

	deadline := time.Now().Add(10 * time.Second)
	for !x.storeHeld(tb) {
		if time.Now().After(deadline) {
			tb.Fatal("window A recorded no hold on store within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-x.gate.entered:
	case r := <-x.aDone:
		tb.Fatalf("window A ended (%v) without stopping store.registry", r.err)
	case <-time.After(10 * time.Second):
		tb.Fatal("window A did not stop store.registry within 10s of recording its hold")
	}
	return x
}

// storeHeld reads holds.json, a snapshot, as status does.
func (x *interleave) storeHeld(tb testing.TB) bool {
	tb.Helper()
	var hd coord.HoldsDoc
	if _, err := x.d.Read(coord.HoldsFile, &hd); err != nil {
		tb.Fatal(err)
	}
	for _, h := range hd.Holds {
		if h.Module == "store" {
			return true
		}
	}
	return false
}

func (x *interleave) apply(ctx context.Context) (*record.Report, error) {
	return apply.Run(ctx, x.d, x.eng, apply.Options{File: x.f, Source: "mesh.yaml", Parallel: 4, Lock: state.LockOptions{Timeout: time.Minute}})
}

func (x *interleave) windowOther(ctx context.Context) (*coord.Entry, error) {
	return window.Run(ctx, x.d, x.eng, window.Options{Module: "other", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}})
}

// within runs fn and returns what it returned, or ok false if it did not
// return within d: it waits, then, for something that has not happened.
func within[T any](x *interleave, d time.Duration, fn func() (T, error)) (v T, err error, ok bool) {
	done := make(chan outcome[T], 1)
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		v, err := fn()
		done <- outcome[T]{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err, true
	case <-time.After(d):
		return v, nil, false
	}
}

// TestWindowStopOutsideTheLock: the state lock guards the bookkeeping, not
// a window's stops. While window A waits out the graceful stop of
// store.registry (held here until the test releases it, as a registry that
// takes its full 10s), a window on another module opens, runs and closes,
// and an apply plans and records, leaving store.registry to A (held). Then
// A goes on: no held container runs at any instant of its step.
func TestWindowStopOutsideTheLock(t *testing.T) {
	x := startInterleave(t, 0)
	const hang = 5 * time.Second // far more than either needs; only a wait for the lock reaches it

	e, err, ok := within(x, hang, func() (*coord.Entry, error) { return x.windowOther(t.Context()) })
	switch {
	case !ok:
		t.Errorf("window other/gc did not end within %s while store.registry was being stopped: it waits for the state lock", hang)
	case err != nil:
		t.Errorf("window other/gc: %v", err)
	case e.Result != window.ResultOK:
		t.Errorf("window other/gc: result %q", e.Result)
	}

	rep, err, ok := within(x, hang, func() (*record.Report, error) { return x.apply(t.Context()) })
	switch {
	case !ok:
		t.Errorf("apply did not end within %s while store.registry was being stopped: it waits for the state lock", hang)
	case err != nil:
		t.Errorf("apply: %v", err)
	default:
		actions := map[string]apply.Action{}
		for _, c := range rep.Containers {
			actions[c.Name] = c.Action
		}
		if actions["store.registry"] != apply.Held || actions["other.web"] != apply.Unchanged {
			t.Errorf("apply mid-window: %v, want store.registry held, other.web unchanged", actions)
		}
		if len(rep.Windows) != 1 || rep.Windows[0].Module != "store" {
			t.Errorf("apply mid-window reports windows %+v, want window A on store", rep.Windows)
		}
	}

	// All of that while A's stop still ran.
	select {
	case r := <-x.aDone:
		t.Fatalf("window A ended (%v) before its stop was let go", r.err)
	default:
	}
	if c, _ := x.eng.Get("store.registry"); !c.Running {
		t.Fatal("store.registry stopped before its stop was let go")
	}

	x.gate.open()
	select {
	case r := <-x.aDone:
		if r.err != nil || r.v.Result != window.ResultOK {
			t.Fatalf("window A: %v, %+v", r.err, r.v)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("window A did not end within 10s of its stop")
	}
	checkHeldWhileStepRan(t, x)
}

// checkHeldWhileStepRan checks, from the fake engine's events, that
// store.registry did not run at any instant of window A's step: its restart
// policy was "no" and it had stopped before the step started, nothing
// started it until the step had ended, and it was started after.
func checkHeldWhileStepRan(t *testing.T, x *interleave) {
	t.Helper()
	start, end := readNanos(t, x.stepStart), readNanos(t, x.stepEnd)
	var stoppedAt, restartNo, startedAgain time.Time
	for _, e := range x.eng.Events()[x.baseline:] {
		if e.Name != "store.registry" || e.Err != "" {
			continue
		}
		switch e.Op {
		case enginetest.OpRestart:
			if e.Arg == "no" && restartNo.IsZero() {
				restartNo = e.At
			}
		case enginetest.OpStop, enginetest.OpKill:
			if stoppedAt.IsZero() {
				stoppedAt = e.At
			}
		case enginetest.OpStart:
			if !e.At.After(end) {
				t.Errorf("event %d: store.registry started at %s, before window A's step ended (step %s .. %s)",
					e.Seq, e.At.Format(time.StampMicro), start.Format(time.StampMicro), end.Format(time.StampMicro))
			} else if startedAgain.IsZero() {
				startedAgain = e.At
			}
		}
	}
	switch {
	case stoppedAt.IsZero() || !stoppedAt.Before(start):
		t.Errorf("store.registry stopped at %v, not before window A's step started at %s", stoppedAt, start.Format(time.StampMicro))
	case restartNo.IsZero() || restartNo.After(stoppedAt):
		t.Errorf("store.registry's restart policy set to no at %v, not before its stop at %s", restartNo, stoppedAt.Format(time.StampMicro))
	case startedAgain.IsZero():
		t.Error("store.registry was not started again after the step")
	}
	if c, ok := x.eng.Get("store.registry"); !ok || !c.Running || c.Spec.Restart != mesh.DefaultRestart {
		t.Errorf("store.registry after window A: %+v, want it running, restart %s", c, mesh.DefaultRestart)
	}
}

// readNanos reads a time the step wrote (date +%s%N).
func readNanos(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the step did not record its time: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns)
}
