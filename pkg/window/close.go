package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// closeLockWait is how long a close waits for the state lock: much longer
// than an apply would, because giving up leaves the hold recorded until the
// next apply or window releases it.
const closeLockWait = 10 * time.Minute

// bringBackTimeout bounds bringing one held container back, a pull of its
// image included; each container's context is made when its turn comes.
const bringBackTimeout = 10 * time.Minute

// closeRounds bounds how often the close converges again because an apply
// deferred a newer change while it was bringing the containers back.
const closeRounds = 3

// close runs on every path. With the state lock released it brings each
// held container to what the most recent apply wants and sets its
// restart policy; then, under the lock, it re-checks that no apply deferred
// a newer change meanwhile, drops the hold and appends the window to the
// history. While it works the window still lives, so its hold is honoured:
// no apply touches the containers it is bringing back.
func (w *window) close(ctx context.Context) (*coord.Entry, error) {
	interrupted := ctx.Err() != nil
	// A run: step whose container still runs, or of which the engine cannot
	// say, may still be sweeping: bringing the held containers back now is
	// the incident this window exists to prevent. The hold stays; it reads
	// orphaned (or unknown) once this process is gone, and stale (released,
	// the containers brought back) once the container is seen exited.
	if err := w.stepStopped(ctx); err != nil {
		return nil, &FailedError{Err: errors.Join(w.stepErr, err), Interrupted: interrupted}
	}

	back, lock, err := w.bringBackConverged(ctx)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()

	if w.result == "" {
		w.result = ResultFailed
	}
	if interrupted {
		w.result = ResultInterrupted
	}
	e, failure, err := w.recordClose(lock, back)
	if err != nil {
		return e, err
	}
	if failure != nil || interrupted {
		if failure == nil {
			failure = errors.New("interrupted")
		}
		return e, &FailedError{Entry: *e, Err: fmt.Errorf("window %s on %s/%s: %w", w.id, w.module, w.step, failure), Interrupted: interrupted}
	}
	return e, nil
}

// bringBackConverged brings the held containers back (bringBack) to what
// the most recent apply wants, then takes the state lock to close, which it
// returns with each container's error. An apply that deferred a newer
// change while the containers came back has it carried out first, up to
// closeRounds times.
func (w *window) bringBackConverged(ctx context.Context) (map[string]error, *state.Lock, error) {
	for round := 1; ; round++ {
		applied, err := w.appliedNow(w.d.Read)
		if err != nil {
			return nil, nil, err
		}
		back := w.bringBack(ctx, applied)
		lock, err := w.lockToClose(ctx)
		if err != nil {
			return nil, nil, err
		}
		// An apply that deferred a change to a held container and still
		// carries out the rest of its plan records the change only once it
		// is done: wait for it, or the change would be lost with the hold.
		c, deferring, err := coord.Deferring(w.d, lock.Read, w.held)
		if err != nil {
			lock.Unlock()
			return nil, nil, err
		}
		if deferring {
			lock.Unlock()
			waited, err := w.waitDeferring(ctx, c)
			if err != nil {
				return nil, nil, err
			}
			if waited && round < closeRounds {
				continue
			}
			if lock, err = w.lockToClose(ctx); err != nil {
				return nil, nil, err
			}
		}
		now, err := w.appliedNow(lock.Read)
		if err != nil {
			lock.Unlock()
			return nil, nil, err
		}
		changed := w.changedMeanwhile(applied, now)
		if len(changed) == 0 {
			return back, lock, nil
		}
		if round == closeRounds {
			w.opts.Progress("an apply changed %s again while the window closed; the next apply converges it\n", strings.Join(changed, ", "))
			return back, lock, nil
		}
		// An apply deferred a newer change while the containers came back:
		// bring them to it before the hold goes.
		lock.Unlock()
	}
}

// waitDeferring waits (bounded by claimWait) for the claim c of an apply
// that deferred a change to a held container: once it ends, the apply has
// recorded the change for the close to carry out (waited). A signalled
// window does not wait: it closes, and the next apply converges the change.
func (w *window) waitDeferring(ctx context.Context, c coord.Claim) (waited bool, err error) {
	if ctx.Err() == nil {
		w.opts.Progress("waiting for apply (pid %d), which deferred a change to %s, to record it\n", c.PID, strings.Join(c.Defers, ", "))
		err = coord.WaitClaim(ctx, w.d, c, max(w.opts.Wait, claimWait))
		if err == nil {
			return true, nil
		}
		if ctx.Err() == nil {
			return false, fmt.Errorf("close window %s: %w; its containers are back, but its hold stays recorded until the next apply or window releases it", w.id, err)
		}
	}
	w.opts.Progress("apply (pid %d) deferred a change to %s and is still at work; the next apply converges it\n", c.PID, strings.Join(c.Defers, ", "))
	return false, nil
}

// recordClose, under the state lock, drops the hold (keeping it on the
// containers that did not come back) and appends the window to the
// history. It returns the entry, and the window's failure: its open's,
// its step's, and the containers' that did not come back as they should.
func (w *window) recordClose(lock *state.Lock, back map[string]error) (*coord.Entry, error, error) {
	now := w.opts.Now()
	e := coord.Entry{ID: w.id, Module: w.module, Step: w.step, OpenedAt: w.openedAt.UTC(), ClosedAt: now.UTC(),
		Result: w.result, StepExitCode: w.stepCode}
	var convergeErrs []error
	var notBack []string
	for _, name := range w.held {
		if err := back[name]; err != nil {
			convergeErrs = append(convergeErrs, fmt.Errorf("%s: %w", name, err))
			if !errors.Is(err, errPutBack) && !errors.Is(err, errUnhealthy) {
				notBack = append(notBack, name)
			}
		}
	}
	if len(notBack) > 0 {
		convergeErrs = append(convergeErrs, fmt.Errorf("%s not brought back; the hold on it stays until this window's process is gone, then the next apply or window brings it back",
			strings.Join(notBack, ", ")))
	}
	failure := errors.Join(w.openErr, w.stepErr, errors.Join(convergeErrs...))
	if failure != nil {
		if e.Result == ResultOK {
			e.Result = ResultFailed
		}
		e.Error = failure.Error()
	}
	// A container that did not come back keeps its hold: once this process
	// is gone the hold reads stale, and the next apply or window brings the
	// container back as this close would have (same container, restart
	// policy set back), then converges it.
	if recorded, err := coord.CloseHold(lock, e, notBack); err != nil {
		return recorded, nil, err
	}
	w.opts.Progress("window %s closed after %s: %s\n", w.id, now.Sub(w.openedAt).Round(time.Millisecond), e.Result)
	return &e, failure, nil
}

// lockToClose takes the state lock for the close, waiting as long as
// closeLockWait (or --lock-timeout, if longer) whatever signal came: its
// context is made now, for this wait alone.
func (w *window) lockToClose(ctx context.Context) (*state.Lock, error) {
	wait := max(w.opts.Lock.Timeout, closeLockWait)
	lockCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait+time.Minute)
	defer cancel()
	lock, err := w.d.Lock(lockCtx, coord.StateLock, state.LockOptions{Timeout: wait, What: "state lock"})
	if err != nil {
		return nil, fmt.Errorf("close window %s: %w; its containers are back, but its hold stays recorded until the next apply or window releases it", w.id, err)
	}
	return lock, nil
}

// appliedNow reads what the most recent apply wants of the held containers.
func (w *window) appliedNow(read func(string, state.Document) (bool, error)) (map[string]*lifecycle.Desired, error) {
	var a record.Applied
	ok, err := read(record.AppliedFile, &a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return w.desired, nil
	}
	all, err := desiredByName(w.d, &a, w.module)
	if err != nil {
		return nil, err
	}
	out := map[string]*lifecycle.Desired{}
	for _, name := range w.held {
		out[name] = all[name]
	}
	return out, nil
}

// changedMeanwhile names the held containers whose desired spec differs
// between two reads of the applied state.
func (w *window) changedMeanwhile(before, now map[string]*lifecycle.Desired) []string {
	var changed []string
	for _, name := range w.held {
		if !sameDesired(before[name], now[name]) {
			changed = append(changed, name)
		}
	}
	return changed
}

func sameDesired(a, b *lifecycle.Desired) bool {
	if a == nil || b == nil {
		return a == b
	}
	return len(mesh.Diff(a.Spec, b.Spec)) == 0 && a.Def.PullPolicy() == b.Def.PullPolicy() && a.PulledID == b.PulledID
}

// stepStopped returns nil once this window's run: step container is known
// not to run. It asks the engine, with a context of its own, the one
// question apply and status ask too (coord.StepsRunning); an engine that
// cannot answer keeps the hold (fail closed).
func (w *window) stepStopped(ctx context.Context) error {
	if w.hold == nil || w.hold.StepContainer == "" {
		return nil
	}
	ctx, cancel := lifecycle.Cleanup(ctx, time.Minute)
	defer cancel()
	running, err := coord.StepsRunning(ctx, w.eng, w.scope)
	keep := fmt.Sprintf("the hold stays so nothing is started mid-step; once it has exited, the next apply or window releases the hold and brings %s back",
		strings.Join(w.held, ", "))
	switch {
	case err != nil:
		return fmt.Errorf("window %s on %s/%s: cannot tell whether its step container %s still runs (%v); %s",
			w.id, w.module, w.step, w.hold.StepContainer, err, keep)
	case running(w.hold.StepContainer):
		return fmt.Errorf("window %s on %s/%s: its step container %s still runs and could not be stopped; %s",
			w.id, w.module, w.step, w.hold.StepContainer, keep)
	}
	return nil
}

// errPutBack marks a deferred change that could not be carried out, where
// the old container was put back and runs: it is back, though not changed.
var errPutBack = errors.New("the old container was put back")

// bringBack brings each held container back, with the state lock released,
// in depends-on order: with bringOne, the rule that decides what a window's
// close starts. It starts the same container (restart policy set back),
// unless an apply deferred a change to it during this window, which it
// carries out (recreate, pulling the image if it is still missing), or
// creates it where it went missing. A spec that drifted before the window
// opened (an earlier apply that failed) is not the window's to change: the
// same container is started and the drift reported. After a signal, the
// same containers are started as they are (bringBackAsIs) and nothing is
// created or recreated: the next apply does that. It returns each
// container's error.
func (w *window) bringBack(ctx context.Context, desired map[string]*lifecycle.Desired) map[string]error {
	out := map[string]error{}
	if w.hold == nil {
		return out
	}
	x := lifecycle.Executor{Engine: w.eng, Scope: w.scope, Settle: w.opts.Settle}
	listCtx, cancel := lifecycle.Cleanup(ctx, time.Minute)
	observed, err := w.eng.List(listCtx, lifecycle.Managed(w.scope))
	cancel()
	if err != nil {
		for _, name := range w.held {
			out[name] = fmt.Errorf("list containers: %w", err)
		}
		return out
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		if lifecycle.IsService(c, w.scope) {
			byName[c.Name] = c
		}
	}
	// In depends-on order: a container comes back after, and once healthy,
	// those it depends on.
	order := lifecycle.DependencyOrder(w.held, func(name string) []string {
		if d := desired[name]; d != nil {
			return d.Def.Dependencies(d.Module)
		}
		return nil
	})
	// Each container's turn is bounded by lifecycle.SignalGrace once a
	// signal came (before or during it). After a signal the close still
	// brings every held container back, but as it was: a deferred change,
	// with its health gate, is left to the next apply.
	signalled := ctx.Err() != nil
	for _, name := range order {
		c, exists := byName[name]
		d := desired[name]
		if !exists && d == nil {
			continue
		}
		cctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
		w.status(name, "bringing back…")
		var err error
		switch {
		case exists && signalled:
			err = w.bringBackAsIs(cctx, x, name, c, d)
		case exists:
			err = w.bringOne(cctx, x, name, c, d)
		case signalled:
			w.opts.Progress("%s is missing: the next apply creates it (this window was interrupted)\n", name)
		default:
			err = w.createMissing(cctx, x, name, d)
		}
		cancel()
		out[name] = err
		switch {
		case err != nil:
			w.status(name, "not brought back")
		case w.opts.Status != nil:
			w.status(name, "running again")
		default:
			w.opts.Progress("started %s again\n", name)
		}
	}
	return out
}

// createMissing creates a held container that went missing during the
// window, as the last apply wants it (d).
func (w *window) createMissing(ctx context.Context, x lifecycle.Executor, name string, d *lifecycle.Desired) error {
	w.opts.Progress("creating %s\n", name)
	if err := w.ensureImage(ctx, d); err != nil {
		return err
	}
	return x.Create(ctx, d)
}

// bringOne brings one held container, c, back when no signal came (see
// bringBack): the same container is started (bringBackAsIs), unless an apply
// deferred a change to it during the window: then it is recreated, and
// put back running if the recreate fails (carryOutDeferred).
func (w *window) bringOne(ctx context.Context, x lifecycle.Executor, name string, c engine.Container, d *lifecycle.Desired) error {
	if diff, deferred := w.drift(name, c, d); deferred {
		w.opts.Progress("recreating %s: an apply deferred a change during the window (%s)\n", name, strings.Join(diff, ", "))
		return w.carryOutDeferred(ctx, x, name, c, d)
	}
	return w.bringBackAsIs(ctx, x, name, c, d)
}

// drift says how held container c differs from the last apply's wish (d;
// nil: none), and whether that is a change an apply deferred during the
// window (the wish changed since the open) rather than one c had before.
func (w *window) drift(name string, c engine.Container, d *lifecycle.Desired) (diff []string, deferred bool) {
	if d == nil {
		return nil, false
	}
	diff = lifecycle.Diff(c, d)
	return diff, len(diff) > 0 && !sameDesired(w.atOpen[name], d)
}

// carryOutDeferred recreates held container c as the last apply wants it
// (d), the change that apply deferred during the window. When the recreate
// fails, only the old container, back under its name, is started again.
func (w *window) carryOutDeferred(ctx context.Context, x lifecycle.Executor, name string, c engine.Container, d *lifecycle.Desired) error {
	err := w.ensureImage(ctx, d)
	if err == nil {
		err = x.Recreate(ctx, d, c)
	}
	if err == nil {
		return nil
	}
	if ol := (*lifecycle.OldLeftError)(nil); errors.As(err, &ol) {
		// The new one runs, healthy: the change is carried out. The
		// old one must stay stopped, aside.
		w.opts.Progress("warning: %v\n", err)
		return nil
	}
	// Ask the engine before starting anything: only the old container,
	// back under its name, may run again; anything else (the failed new
	// one still there, the old one still aside) stays as it is, and the
	// hold with it (fail closed).
	ictx, cancel := lifecycle.Cleanup(ctx, time.Minute) // a signal may have cut the recreate short
	back, ierr := w.eng.Inspect(ictx, name)
	cancel()
	if ierr != nil || back.ID != c.ID {
		return fmt.Errorf("%w; %s is not back under its name, so nothing is started", err, name)
	}
	if rerr := coord.BringBack(ctx, x, c, w.hold.Restart[name]); rerr != nil {
		return errors.Join(err, rerr)
	}
	return fmt.Errorf("%w, and runs: %w", errPutBack, err)
}

// bringBackAsIs brings held container c back as it is (coord.BringBack).
// Its restart policy is the one the last apply wants (d), else the one
// recorded at open. A difference from d is left to the next apply. That is
// a change an apply deferred during a signalled window, or one c had
// before the window.
func (w *window) bringBackAsIs(ctx context.Context, x lifecycle.Executor, name string, c engine.Container, d *lifecycle.Desired) error {
	policy := w.hold.Restart[name]
	if d != nil {
		policy = d.EngineSpec(w.scope).Restart
	}
	switch diff, deferred := w.drift(name, c, d); {
	case deferred:
		w.opts.Progress("%s: the change an apply deferred (%s) is left to the next apply: this window was interrupted\n", name, strings.Join(diff, ", "))
	case len(diff) > 0:
		w.opts.Progress("%s differs from the last apply (%s), as it did before the window: started as it was; the next apply converges it\n",
			name, strings.Join(diff, ", "))
	}
	if err := coord.BringBack(ctx, x, c, policy); err != nil {
		return err
	}
	// Back means back and healthy: a container that runs but fails its
	// probe, or exits, is the window's failure (exit 1). It runs, so the
	// hold goes: nothing the next apply could do better.
	if _, err := x.WaitHealthy(ctx, c.ID, name); err != nil {
		return fmt.Errorf("%w: %w", errUnhealthy, err)
	}
	return nil
}

// errUnhealthy marks a held container that was started again but did not
// become healthy.
var errUnhealthy = errors.New("started again, but not healthy")

// ensureImage pulls d's image if the engine still lacks it and its pull
// policy allows: the apply that deferred the change should have got it
// ready, but an image can go missing (pruned) meanwhile.
func (w *window) ensureImage(ctx context.Context, d *lifecycle.Desired) error {
	present, err := w.eng.ImagePresent(ctx, d.Image)
	if err != nil {
		return fmt.Errorf("image %s: %w", d.Image, err)
	}
	if present {
		return nil
	}
	if err := d.Def.PullRefused(); err != nil {
		return fmt.Errorf("image %s: %w", d.Image, err)
	}
	w.opts.Progress("pulling %s\n", d.Image)
	if err := w.eng.Pull(ctx, d.Image, nil); err != nil {
		return fmt.Errorf("pull %s: %w", d.Image, err)
	}
	return nil
}
