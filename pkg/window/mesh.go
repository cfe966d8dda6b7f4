package window

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// A mesh window (mesh: all) is one step for every host of a module. The
// hosts meet in a gathering in etcd (ledger.Gathered). Each host's window
// goes through it in this order:
//
//	join -> all joined -> hold -> held -> start (runner) or wait for it
//	     -> step (runner) or wait for its end -> close -> closed
//
// Nothing is held before every host joined. So a gathering that fails
// costs nothing. Once the step started, a host that cannot learn its end
// keeps its hold: a lapsed lease never says that a sweep ended.

// errNoGatherStore refuses a mesh: all step without an etcd ledger.
func errNoGatherStore(module, step string) error {
	return fault.New(fault.BadInput, "step %s/%s has mesh: all, which needs an etcd ledger shared by the hosts: set --ledger etcd://HOST:PORT[,HOST:PORT…] (or MESHCTL_LEDGER); nothing was held", module, step)
}

// meshPart is this host's part in a mesh window.
type meshPart struct {
	g ledger.Gathered
	// joined is the gathering once every host joined.
	joined ledger.Gathering
	// started says that the runner started the step.
	started bool
	// kept says that this host keeps its hold past its exit. The step
	// started, and its end is not known.
	kept error
}

// runner says whether this host runs the mesh window's step. A window of
// this host only always does.
func (w *window) runner() bool { return w.mesh == nil || w.mesh.g.Runner() }

// refuseBesideGathering refuses a window of this host only on a module
// whose mesh window is open (exit 3). A module with no mesh: all step
// never asks etcd.
func (w *window) refuseBesideGathering(ctx context.Context) error {
	if w.def.MeshAll() || !w.usesMesh || w.opts.Gather == nil {
		return nil
	}
	g, ok, err := w.opts.Gather.Gathering(ctx, w.module)
	switch {
	case err != nil:
		return fmt.Errorf("module %s has a mesh window step, and etcd cannot say whether one is open: %w; nothing held", w.module, err)
	case ok && !g.Over():
		return gatheringBusy(g)
	}
	return nil
}

// gatheringBusy refuses a window beside g, the module's open mesh window.
func gatheringBusy(g ledger.Gathering) *BusyError {
	return &BusyError{Module: g.Module, Why: fmt.Sprintf("mesh window %s of step %s is %s (runner %s)", g.ID, g.Step, g.State, g.Runner)}
}

// join is this host's join of the module's mesh window.
func (w *window) join() ledger.Join {
	return ledger.Join{Module: w.module, Step: w.step, Host: w.opts.Host, Hash: w.hash, PID: os.Getpid(),
		Gather: w.def.GatherOrDefault(), Timeout: w.timeout, Stopped: len(w.def.WhileStopped) > 0, MaxUnavailable: w.budget}
}

// gather joins the module's mesh window and waits until every host
// joined. Nothing is held yet. A gathering that fails, or a signal, ends
// the window here.
func (w *window) gather(ctx context.Context) error {
	if !w.def.MeshAll() {
		return nil
	}
	g, err := w.opts.Gather.JoinGathering(ctx, w.join())
	if err != nil {
		return gatherFailed(err)
	}
	w.mesh = &meshPart{g: g}
	cur := g.Gathering()
	role := "runs the step"
	if !g.Runner() {
		role = "holds; host " + cur.Runner + " runs the step"
	}
	w.opts.Progress("mesh window %s/%s: joined gathering %s (hosts %s); this host %s\n",
		w.module, w.step, cur.ID, strings.Join(cur.Expected, ", "), role)
	if missing := cur.Missing(); len(missing) > 0 {
		w.opts.Progress("mesh window %s/%s: waiting for %s, until %s\n", w.module, w.step,
			strings.Join(missing, ", "), state.When(cur.Deadline))
	}
	all, err := g.AllJoined(ctx)
	if err != nil {
		w.failGathering(ctx, "it stopped waiting for the others")
		return gatherFailed(err)
	}
	w.mesh.joined = all
	if !g.Runner() {
		// The step runs on the runner's host. This host runs none of it.
		w.guard.stop()
		w.guard = nil
	}
	w.opts.Progress("mesh window %s/%s: every host joined; holding\n", w.module, w.step)
	return nil
}

// gatherFailed says that nothing was held, whatever the gathering said.
// Its kind is kept: a GatherError's, or etcd's failure (exit 1).
func gatherFailed(err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	var ge *ledger.GatherError
	if errors.As(err, &ge) {
		return fault.New(ge.Kind, "%v; nothing held", ge)
	}
	return fmt.Errorf("mesh window: %w; nothing held", err)
}

// failGathering fails the gathering before its step starts, so that every
// host brings its containers back. It has a context of its own, since it
// also runs after a signal. A gathering that cannot be failed fails anyway,
// at its deadline or when this host's session lapses. Once this host said
// it held, the step may have started all the same: a wait for the start
// interrupted just after it. failGathering then says it started, also
// when etcd cannot say (fail closed).
func (w *window) failGathering(ctx context.Context, why string) (started bool) {
	if w.mesh == nil {
		return false
	}
	fctx, cancel := lifecycle.Cleanup(ctx, 30*time.Second)
	defer cancel()
	err := w.mesh.g.Fail(fctx, why)
	if err == nil {
		return false
	}
	id := w.mesh.g.Gathering().ID
	g, ok, gerr := w.opts.Gather.GatheringByID(fctx, w.module, id)
	if gerr == nil && ok && (g.State == ledger.GatherFailed || g.State == ledger.GatherOpen || g.State == ledger.GatherHolding) {
		w.opts.Progress("warning: mesh window %s/%s: %v\n", w.module, w.step, err)
		return false
	}
	w.opts.Progress("mesh window %s/%s: gathering %s may have started its step (%v): this host keeps holding until its end\n", w.module, w.step, id, err)
	return true
}

// leaveUnheld fails the gathering of a window that held nothing, saying
// why, and leaves it. Its step cannot have started: this host never said
// it held.
func (w *window) leaveUnheld(ctx context.Context, why string) {
	w.failGathering(ctx, why)
	w.closed(ctx)
}

// markHeld says in etcd that this host holds, then waits for the start.
// The runner starts the step once every host held. Another host waits for
// that start. A failure here fails the gathering, and the close brings
// the containers back.
func (w *window) markHeld(ctx context.Context) error {
	if w.mesh == nil {
		return nil
	}
	g := w.mesh.g
	if err := g.Held(ctx); err != nil {
		w.failGathering(ctx, "it could not say that it held")
		return gatherFailed(err)
	}
	// Every host stops its own containers, at most their stop bounds.
	// The runner waits that long for the others, then one gather more.
	bound := w.def.GatherOrDefault()
	for _, n := range w.held {
		bound += lifecycle.ChangeBound(w.desired[n])
	}
	sctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var err error
	if g.Runner() {
		w.opts.Progress("mesh window %s/%s: waiting for every host to hold\n", w.module, w.step)
		err = g.Start(sctx)
	} else {
		w.opts.Progress("mesh window %s/%s: waiting for host %s to start the step\n", w.module, w.step, w.mesh.joined.Runner)
		err = g.WaitStart(sctx)
	}
	if err != nil {
		if ctx.Err() == nil && sctx.Err() != nil {
			err = fmt.Errorf("the step did not start within %s of this host's hold", bound)
		}
		if !w.failGathering(ctx, "the step did not start: "+err.Error()) {
			return gatherFailed(err)
		}
		// The step started, or may have. A host that does not run it waits
		// for its end. The runner has not run it: it records that end.
		w.mesh.started = true
		if g.Runner() {
			return fmt.Errorf("mesh window %s/%s: the step's start may be recorded, but this host did not see it (%w): it does not run it", w.module, w.step, err)
		}
		return nil
	}
	w.mesh.started = true
	return nil
}

// recordEnd, on the runner, records the step's end in etcd. Every host
// closes on it. One not recorded keeps the hold, and the step container
// stays exited: the next apply or window on this host records the end
// from it (coord.ReleaseStale).
func (w *window) recordEnd(ctx context.Context) {
	if w.mesh == nil || !w.mesh.started || !w.runner() {
		return
	}
	// A step container that may still run has not ended. The next apply
	// or window on this host records its end once it exited.
	if err := w.stepStopped(ctx); err != nil {
		w.mesh.kept = err
		return
	}
	end := ledger.StepEnd{Result: w.result, Code: w.stepCode, At: w.opts.Now().UTC(), By: w.opts.Host}
	if end.Result == "" {
		end.Result = ResultFailed
	}
	rctx, cancel := lifecycle.Cleanup(ctx, time.Minute)
	defer cancel()
	if err := w.mesh.g.End(rctx, end); err != nil {
		w.mesh.kept = fmt.Errorf("mesh window %s/%s: the step's end (%s) is not recorded in etcd: %w; every host keeps its hold until this host's next apply or window run records it",
			w.module, w.step, end.Result, err)
		return
	}
	w.removeStepContainer(ctx)
}

// removeStepContainer removes the runner's exited step container once its
// end is recorded. Until then it says how the step ended.
func (w *window) removeStepContainer(ctx context.Context) {
	if w.hold == nil || w.hold.StepContainer == "" {
		return
	}
	rctx, cancel := lifecycle.Cleanup(ctx, removeTimeout)
	defer cancel()
	if err := w.eng.Remove(rctx, w.hold.StepContainer); err != nil && !engine.IsNotFound(err) {
		w.opts.Progress("remove step container %s: %v\n", w.hold.StepContainer, err)
	}
}

// awaitEnd, on a host that does not run the step, waits for its end. It
// waits at most the gathering's deadline plus the step's timeout. The
// step's end becomes this window's result. Past that bound, or after a
// signal, the hold stays: the step may still run elsewhere.
func (w *window) awaitEnd(ctx context.Context) {
	if w.mesh == nil || !w.mesh.started || w.runner() {
		return
	}
	until := w.mesh.joined.Deadline.Add(w.timeout)
	if until.Before(time.Now()) {
		until = time.Now().Add(w.timeout)
	}
	w.stepStart = time.Now()
	w.opts.Progress("mesh window %s/%s: the step runs on host %s; waiting for its end (until %s)\n",
		w.module, w.step, w.mesh.joined.Runner, state.When(until))
	end, err := w.mesh.g.WaitEnd(ctx, until)
	w.stepEnd = time.Now()
	if err != nil {
		why := err.Error()
		switch {
		case ctx.Err() != nil:
			why = "interrupted"
		case errors.Is(err, context.DeadlineExceeded):
			why = "it was not recorded by " + state.When(until)
		}
		w.mesh.kept = fmt.Errorf("mesh window %s/%s: the end of the step on host %s is not known (%s): %s stay held until it is; then the next apply brings them back",
			w.module, w.step, w.mesh.joined.Runner, why, strings.Join(w.held, ", "))
		return
	}
	w.result, w.stepCode = end.Result, end.Code
	if !end.OK() {
		w.stepErr = fmt.Errorf("step %s on host %s: %s", w.step, w.mesh.joined.Runner, end)
	}
	w.opts.Progress("mesh window %s/%s: the step ended on host %s: %s\n", w.module, w.step, end.By, end.Result)
}

// keptError is the window's error when it exits with its hold kept.
func (w *window) keptError(ctx context.Context) error {
	return &FailedError{Err: w.mesh.kept, Interrupted: ctx.Err() != nil}
}

// keepsHold says whether this host must leave its hold in place. The step
// started and its end is not known here: interrupted while it runs
// elsewhere, or its end not read or not recorded.
func (w *window) keepsHold() bool { return w.mesh != nil && w.mesh.kept != nil }

// closed says in etcd that this host closed, and leaves the gathering.
func (w *window) closed(ctx context.Context) {
	if w.mesh == nil {
		return
	}
	defer w.mesh.g.Leave()
	if w.keepsHold() {
		return
	}
	cctx, cancel := lifecycle.Cleanup(ctx, 30*time.Second)
	defer cancel()
	if err := w.mesh.g.Closed(cctx, w.allBack); err != nil {
		w.opts.Progress("warning: mesh window %s/%s: this host's close is not recorded in etcd: %v\n", w.module, w.step, err)
	}
}

// meshOf is what the classification of holds asks etcd through: the
// mesh windows' gatherings, and this host's name.
func (w *window) meshOf() coord.Mesh {
	return coord.Mesh{Gather: w.opts.Gather, Host: w.opts.Host}
}

// meshHold records the gathering in this host's hold. A host that does not
// run the step has no step container and no step group.
func (w *window) meshHold(h *coord.Hold) {
	if w.mesh == nil {
		return
	}
	h.Gathering, h.Runner = w.mesh.joined.ID, w.mesh.joined.Runner
	if !w.runner() {
		h.StepContainer, h.StepGroup = "", 0
	}
}
