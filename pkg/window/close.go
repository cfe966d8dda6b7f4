package window

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// closeLockWait is how long a close waits for the state lock. It is much
// longer than an apply would wait. Giving up leaves the hold recorded
// until the next apply or window releases it.
const closeLockWait = 10 * time.Minute

// bringBackTimeout bounds bringing one held container back, a pull of its
// image included. Each container's context is made when its turn comes.
const bringBackTimeout = 10 * time.Minute

// closeRounds bounds how often the close converges again because an apply
// deferred a newer change while it was bringing the containers back.
const closeRounds = 3

// close runs on every path. With the state lock released, it brings each
// held container to what the most recent apply wants and sets its restart
// policy. Then, under the lock, it re-checks that no apply deferred a
// newer change meanwhile. It drops the hold and appends the window to the
// history. While it works the window still lives, so its hold is honoured.
// No apply touches the containers it is bringing back.
func (w *window) close(ctx context.Context) (*coord.Entry, error) {
	interrupted := ctx.Err() != nil
	// A run step whose container still runs may still be sweeping. So may
	// one of which the engine cannot say. Bringing the held containers back
	// now is the incident this window exists to prevent. So the hold stays.
	// Once this process is gone it reads orphaned, or unknown. Once the
	// container is seen exited it reads stale. Then it is released, and the
	// held containers are brought back.
	if err := w.stepStopped(ctx); err != nil {
		return nil, &FailedError{Err: errors.Join(w.stepErr, err), Interrupted: interrupted}
	}

	back, lock, wish, err := w.bringBackConverged(ctx)
	if err != nil {
		return nil, err
	}
	if lock, err = w.convergeDependents(ctx, lock, wish, back); err != nil {
		return nil, err
	}
	defer func() { lock.Unlock() }()
	// Only those that came back: one whose secret is not a file stays
	// stopped, and its error says why.
	if broughtBack := slices.DeleteFunc(slices.Clone(w.held), func(name string) bool { return back[name] != nil }); w.missing != nil && len(broughtBack) > 0 {
		w.opts.Progress("warning: %v: %s brought back as it was; put the file back, then meshctl apply --last\n",
			w.missing, strings.Join(broughtBack, ", "))
	}

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

// bringBackConverged brings the held containers back to what the most
// recent apply wants, with bringBack. Then it takes the state lock to
// close. It returns the lock, each container's error, and the wish read
// under the lock. An apply may defer a newer change while the containers
// come back. That change is carried out first, up to closeRounds times.
func (w *window) bringBackConverged(ctx context.Context) (map[string]error, *state.Lock, map[string]*lifecycle.Desired, error) {
	for round := 1; ; round++ {
		applied, deferred, err := w.wishNow(w.d.Read)
		if err != nil {
			return nil, nil, nil, err
		}
		w.deferred = deferred
		back := w.bringBack(ctx, applied)
		lock, err := w.lockToClose(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		// An apply that deferred a change to a held container may still carry
		// out the rest of its plan. It records the change only once it is done.
		// Wait for it, or the change would be lost with the hold.
		c, deferring, err := coord.Deferring(w.d, lock.Read, w.held)
		if err != nil {
			lock.Unlock()
			return nil, nil, nil, err
		}
		if deferring {
			lock.Unlock()
			waited, err := w.waitDeferring(ctx, c)
			if err != nil {
				return nil, nil, nil, err
			}
			if waited && round < closeRounds {
				continue
			}
			if lock, err = w.lockToClose(ctx); err != nil {
				return nil, nil, nil, err
			}
		}
		now, nowDeferred, err := w.wishNow(lock.Read)
		if err != nil {
			lock.Unlock()
			return nil, nil, nil, err
		}
		changed := w.changedMeanwhile(applied, now, deferred, nowDeferred)
		if len(changed) == 0 {
			w.deferred = nowDeferred
			return back, lock, now, nil
		}
		if round == closeRounds {
			w.opts.Progress("an apply changed %s again while the window closed; the next apply converges it\n", strings.Join(changed, ", "))
			return back, lock, now, nil
		}
		// An apply deferred a newer change while the containers came back.
		// Bring them to it before the hold goes.
		lock.Unlock()
	}
}

// waitDeferring waits, at most claimWait, for the claim c of an apply that
// deferred a change to a held container. Once the claim ends, the apply has
// recorded the change for the close to carry out, and waited is true. A
// signalled window does not wait. It closes, and the next apply converges
// the change.
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

// recordClose drops the hold under the state lock and appends the window
// to the history. The hold stays on the containers that did not come back.
// It returns the entry and the window's failure. That failure is its
// open's, its step's, or that of containers that did not come back as
// they should.
func (w *window) recordClose(lock *state.Lock, back map[string]error) (*coord.Entry, error, error) {
	now := w.opts.Now()
	e := coord.Entry{ID: w.id, Module: w.module, Step: w.step, OpenedAt: w.openedAt.UTC(), ClosedAt: now.UTC(),
		Result: w.result, StepExitCode: w.stepCode}
	if w.mesh != nil {
		e.Gathering, e.Runner = w.mesh.joined.ID, w.mesh.joined.Runner
	}
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
	// The module's slot of its budget goes back only once every held
	// container runs healthy again, whatever the step's result.
	w.allBack = len(convergeErrs) == 0 && w.openErr == nil
	// A dependent is not held, so its failure keeps no hold.
	for _, name := range w.dependents() {
		if err := w.dependentErrs[name]; err != nil {
			convergeErrs = append(convergeErrs, fmt.Errorf("%s: %w", name, err))
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
	// A container that did not come back keeps its hold. Once this process
	// is gone the hold reads stale. The next apply or window then brings the
	// container back as this close would have, with its restart policy set
	// back. Then it converges it.
	if recorded, err := coord.CloseHold(lock, e, notBack); err != nil {
		return recorded, nil, err
	}
	w.opts.Progress("window %s closed after %s: %s\n", w.id, now.Sub(w.openedAt).Round(time.Millisecond), e.Result)
	return &e, failure, nil
}

// lockToClose takes the state lock for the close, whatever signal came.
// It waits as long as closeLockWait, or --lock-timeout if that is longer.
// Its context is made now, for this wait alone.
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

// wishNow reads what the most recent apply wants of the held containers
// and their deferred dependents. It also reads which of them an apply
// reported deferred during this window, as the hold records.
func (w *window) wishNow(read func(string, state.Document) (bool, error)) (map[string]*lifecycle.Desired, []string, error) {
	deferred, err := coord.DeferredIn(read, w.id)
	if err != nil {
		return nil, nil, err
	}
	applied, err := w.appliedNow(read, deferred)
	return applied, deferred, err
}

// appliedNow reads what the most recent apply wants of the held containers
// and of the others in deferred.
func (w *window) appliedNow(read func(string, state.Document) (bool, error), deferred []string) (map[string]*lifecycle.Desired, error) {
	var a record.Applied
	ok, err := read(record.AppliedFile, &a)
	if err != nil {
		return nil, err
	}
	if !ok {
		return w.desired, nil
	}
	all, err := desiredByName(w.d, &a, w.module)
	if unreadableWish(err) {
		// The held containers' own files cannot be read now. Each container
		// is still what ran before the window, so it comes back as it was.
		// The next apply converges it once the file is back.
		w.missing = err
		return map[string]*lifecycle.Desired{}, nil
	}
	if err != nil {
		return nil, err
	}
	w.missing = nil
	out := map[string]*lifecycle.Desired{}
	for _, name := range append(slices.Clone(w.held), deferred...) {
		out[name] = all[name]
	}
	return out, nil
}

// unreadableWish says whether err is a module file that cannot be read
// now: an env-file, a secret or a config. The module's wish is then
// unknown, though its containers are not.
func unreadableWish(err error) bool {
	var ef *mesh.EnvFileError
	var sf *mesh.SecretFileError
	return errors.As(err, &ef) || errors.As(err, &sf)
}

// changedMeanwhile names the held containers whose desired spec differs
// between two reads of the applied state. So does one an apply reported
// deferred between the two reads.
func (w *window) changedMeanwhile(before, now map[string]*lifecycle.Desired, deferredBefore, deferredNow []string) []string {
	var changed []string
	for _, name := range w.held {
		if !sameDesired(before[name], now[name]) || slices.Contains(deferredBefore, name) != slices.Contains(deferredNow, name) {
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

// stepStopped returns nil once this window's run step container is known
// not to run. It asks the engine, with a context of its own. Apply and
// status ask the same question, through coord.StepsRunning. An engine
// that cannot answer keeps the hold, so it fails closed.
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

// errPutBack marks a deferred change that could not be carried out. The
// old container was put back and runs. It is back, though not changed.
var errPutBack = errors.New("the old container was put back")

// bringBack brings each held container back in depends-on order, with the
// state lock released. With bringOne, it is the rule that decides what a
// window's close starts. It starts the same container and sets its restart
// policy back. An apply may have reported it deferred during this window.
// Then bringBack carries the change out, by a recreate that pulls the
// image if it is still missing. It creates a container that went missing.
// Drift no apply deferred during the window is not the window's to change.
// An earlier apply that failed may have left it, or a secret rotated
// mid-window. Then the same container is started and the drift reported. After
// a signal, the same containers are started as they are, by
// bringBackAsIs. Nothing is created or recreated, since the next apply
// does that. It returns each container's error.
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
	// In depends-on order. A container comes back after those it depends
	// on, and once they are healthy.
	order := lifecycle.DependencyOrder(w.held, func(name string) []string {
		if d := desired[name]; d != nil {
			return d.Def.Dependencies(d.Module)
		}
		return nil
	})
	// Each container's turn is bounded by lifecycle.SignalGrace once a
	// signal came, before or during it. After a signal the close still brings
	// every held container back, but as it was. A deferred change, with its
	// health gate, is left to the next apply.
	signalled := ctx.Err() != nil
	for _, name := range order {
		cctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
		if _, changed := w.hold.Changed[name]; changed {
			// Whatever signal came: a window never leaves a container changed.
			if err := w.unchange(cctx, x, name, byName); err != nil {
				cancel()
				out[name] = err
				w.status(name, "not brought back")
				continue
			}
		}
		c, exists := byName[name]
		d := desired[name]
		if !exists && d == nil {
			cancel()
			continue
		}
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
// window. It creates it as d, the last apply's wish.
func (w *window) createMissing(ctx context.Context, x lifecycle.Executor, name string, d *lifecycle.Desired) error {
	w.opts.Progress("creating %s\n", name)
	if err := w.ensureImage(ctx, d); err != nil {
		return err
	}
	return x.Create(ctx, d)
}

// bringOne brings one held container, c, back when no signal came. It
// starts the same container, with bringBackAsIs. An apply may have
// deferred a change to it during the window. Then carryOutDeferred
// recreates it, and puts the old one back running if the recreate fails.
func (w *window) bringOne(ctx context.Context, x lifecycle.Executor, name string, c engine.Container, d *lifecycle.Desired) error {
	if diff, deferred := w.drift(name, c, d); deferred {
		w.opts.Progress("recreating %s: an apply deferred a change during the window (%s)\n", name, strings.Join(diff, ", "))
		return w.carryOutDeferred(ctx, x, name, c, d)
	}
	return w.bringBackAsIs(ctx, x, name, c, d)
}

// drift says how held container c differs from d, the last apply's wish.
// With a nil d there is no wish and no difference. It also says whether
// an apply reported c deferred during this window, as its hold records.
// Only then is the difference the window's to carry out. Otherwise it is
// drift no apply saw. It came before the window, or from a file changed
// during it.
func (w *window) drift(name string, c engine.Container, d *lifecycle.Desired) (diff []string, deferred bool) {
	if d == nil {
		return nil, false
	}
	diff = lifecycle.Diff(c, d)
	return diff, len(diff) > 0 && slices.Contains(w.deferred, name)
}

// carryOutDeferred recreates held container c as d, the last apply's
// wish. That is the change the apply deferred during the window. When the
// recreate fails, only the old container, back under its name, is started again.
func (w *window) carryOutDeferred(ctx context.Context, x lifecycle.Executor, name string, c engine.Container, d *lifecycle.Desired) error {
	err := w.ensureImage(ctx, d)
	if err == nil {
		err = x.Recreate(ctx, d, c)
	}
	if err == nil {
		return nil
	}
	if ol := (*lifecycle.OldLeftError)(nil); errors.As(err, &ol) {
		// The new one runs, healthy, so the change is carried out. The
		// old one must stay stopped, aside.
		w.opts.Progress("warning: %v\n", err)
		return nil
	}
	// Ask the engine before starting anything. Only the old container,
	// back under its name, may run again. Anything else stays as it is,
	// and the hold with it, so the close fails closed. The failed new one
	// may still be there, or the old one still aside.
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
		w.opts.Progress("%s differs from the last apply (%s), and no apply deferred that change during the window: started as it was; the next apply converges it\n",
			name, strings.Join(diff, ", "))
	}
	if err := coord.BringBack(ctx, x, c, policy); err != nil {
		return err
	}
	// Back means back and healthy. A container that runs but fails its
	// probe, or exits, is the window's failure, exit 1. It runs, so the
	// hold goes. The next apply could do nothing better.
	if _, err := x.WaitHealthy(ctx, c.ID, name); err != nil {
		return fmt.Errorf("%w: %w", errUnhealthy, err)
	}
	return nil
}

// errUnhealthy marks a held container that was started again but did not
// become healthy.
var errUnhealthy = errors.New("started again, but not healthy")

// ensureImage pulls d's image if the engine still lacks it and its pull
// policy allows. The apply that deferred the change should have got it
// ready. But an image can go missing meanwhile, for example by a prune.
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
