package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// StopTimeout is how long a container that apply or a window stops gets
// to stop gracefully. Then it is killed. Its stop-grace-period may say
// otherwise (StopTimeoutOf).
const StopTimeout = mesh.DefaultStopGracePeriod

// cleanupTimeout bounds the work that must happen even after a signal.
// That is putting an old container back, or restarting what a window held.
const cleanupTimeout = 2 * time.Minute

// Executor carries out container actions on an engine. Window's close uses it
// too, to bring held containers to what the last apply wants.
type Executor struct {
	Engine engine.Client
	// Scope is the state directory's ID, the value of LabelManaged.
	Scope string
	// Settle is how long a new container without a healthcheck must keep
	// running before it counts as started (WaitHealthy). Zero looks once.
	Settle time.Duration
	// Health, when not nil, is told the health each container Create and
	// Recreate start reaches.
	Health func(name, health string)
	// Watching, when not nil, runs wait, the health wait of Create and
	// Recreate. It runs it outside the caller's share of the work done at
	// once, apply's --parallel slot. It returns once wait has returned and
	// that share is the caller's again. A health wait is watching, not
	// engine work.
	Watching func(wait func())
}

// Create creates and starts d, and waits until it is healthy
// (WaitHealthy).
func (x Executor) Create(ctx context.Context, d *Desired) error {
	if err := x.EnsureNetworks(ctx, d.Spec.Networks); err != nil {
		return fmt.Errorf("create %s: %w", d.Name, err)
	}
	id, err := x.Engine.Create(ctx, d.Name, d.EngineSpec(x.Scope))
	if err != nil {
		return err // the engine's error says "create NAME: …" already
	}
	err = x.startNew(ctx, d, id)
	if err != nil {
		err = fmt.Errorf("start %s: %w", d.Name, err)
	} else {
		err = x.gate(ctx, id, d.Name)
	}
	if err != nil {
		// A container that cannot start, or never becomes healthy, is not
		// left behind half-made. The next apply tries again.
		rmErr := x.Engine.Remove(CleanupContext(ctx), id)
		return errors.Join(err, wrapErr("remove the new "+d.Name, rmErr))
	}
	return nil
}

// gate waits for the container id, just started, to be healthy, and tells
// x.Health what it reached.
func (x Executor) gate(ctx context.Context, id, name string) error {
	var h string
	var err error
	wait := func() { h, err = x.WaitHealthy(ctx, id, name) }
	if x.Watching != nil {
		x.Watching(wait)
	} else {
		wait()
	}
	if x.Health != nil && h != "" {
		x.Health(name, h)
	}
	return err
}

// Recreate replaces old with a new container for d. The new container is
// created under a temporary name (NewName) before the old one stops. So
// the service is down only for the old one's stop and the new one's start.
// Then the old one is renamed aside (OldName), and the new one takes the
// name. The old container is kept, stopped and aside, until the new one
// is healthy (WaitHealthy). If that fails, the new one is removed. The old
// one is put back under its name, and started if it was running. So a bad
// image never leaves the host without the service. Nor does one that
// crashes or never becomes ready. A running container whose update order
// is start-first is replaced without a gap (recreateStartFirst).
func (x Executor) Recreate(ctx context.Context, d *Desired, old engine.Container) (err error) {
	if StartsFirst(d, old.Running) {
		return x.recreateStartFirst(ctx, d, old)
	}
	// Before the old one stops, so a network that cannot be had leaves it
	// running.
	if err := x.EnsureNetworks(ctx, d.Spec.Networks); err != nil {
		return fmt.Errorf("create new %s: %w; the old container was left as it was", d.Name, err)
	}
	id, err := x.createNew(ctx, d)
	if err != nil {
		return fmt.Errorf("create new %s: %w; the old container was left as it was", d.Name, err)
	}
	if old.Running {
		// Seen through after a signal too. Then the new one goes and the
		// old one is started again. The same holds if the engine said no,
		// since it may have acted all the same.
		if err := StopThrough(ctx, x.Engine, old.ID, StopTimeoutOf(old)); (err != nil && !x.stopped(ctx, old.ID)) || ctx.Err() != nil {
			return x.putBackUnmoved(ctx, d.Name, id, old, fmt.Errorf("stop %s: %w", d.Name, errors.Join(err, context.Cause(ctx))))
		}
	}
	// Started under its temporary name. The renames come after, so the
	// service no longer waits for them.
	if err := x.startNew(ctx, d, id); err != nil {
		return x.putBackUnmoved(ctx, d.Name, id, old, fmt.Errorf("start new %s: %w", d.Name, err))
	}
	if err := x.renameAside(ctx, d.Name, old); err != nil {
		return x.putBackUnmoved(ctx, d.Name, id, old, fmt.Errorf("rename %s aside: %w", d.Name, err))
	}
	aside := old
	aside.Name = OldName(d.Name)
	err = x.Rename(ctx, id, d.Name)
	if err != nil {
		err = fmt.Errorf("rename new %s to its name: %w", d.Name, err)
	} else {
		err = x.gate(ctx, id, d.Name)
	}
	if err != nil {
		if perr := x.PutBack(ctx, d.Name, id, aside); perr != nil {
			return errors.Join(err, perr)
		}
		return fmt.Errorf("%w; the old container was put back", err)
	}
	if err := x.RemoveGone(ctx, old.ID); err != nil {
		return &OldLeftError{Name: d.Name, Err: err}
	}
	return nil
}

// createNew creates d's container under its temporary name, NewName. One
// of this state directory already there is left by a recreate that died
// half way. It never passed a health gate under the name. Whoever
// recreates the name now owns it, under a claim or a live window's hold.
// So it goes.
func (x Executor) createNew(ctx context.Context, d *Desired) (string, error) {
	return x.createNewAs(ctx, d, d.EngineSpec(x.Scope))
}

// createNewAs is createNew with the engine spec given.
func (x Executor) createNewAs(ctx context.Context, d *Desired, spec engine.Spec) (string, error) {
	tmp := NewName(d.Name)
	id, err := x.Engine.Create(ctx, tmp, spec)
	if err == nil {
		return id, nil
	}
	left, ierr := x.Engine.Inspect(ctx, tmp)
	if ierr != nil || left.Labels[LabelManaged] != x.Scope {
		return "", err
	}
	if rerr := x.RemoveGone(ctx, left.ID); rerr != nil {
		return "", errors.Join(err, fmt.Errorf("remove leftover %s: %w", tmp, rerr))
	}
	return x.Engine.Create(ctx, tmp, spec)
}

// RemoveNew removes the container id made under name's temporary name
// (NewName). That container never passed a health gate under the name. A
// recreate that failed before the new one took the name calls it. So does
// coord.HealClaims, for one whose recreate died. Both call it before
// starting any old container. It runs even after a signal.
func (x Executor) RemoveNew(ctx context.Context, name, id string) error {
	return wrapErr("remove the new "+NewName(name), x.removeAgain(ctx, id))
}

// removeAgain removes container id with RemoveGone, up to putBackTries
// times, each with a fresh cleanup context. A removal that hung after a
// signal is given up on after SignalGrace. The next one may be answered.
func (x Executor) removeAgain(ctx context.Context, id string) error {
	return askAgain(ctx, func(ctx context.Context) error { return x.RemoveGone(ctx, id) })
}

// StartOld starts old, as PutBack would have. A recreate left old stopped
// under name. It died before renaming old aside.
func (x Executor) StartOld(ctx context.Context, name string, old engine.Container) error {
	old.Running = true
	return x.restart(ctx, name, old)
}

// putBackUnmoved undoes a recreate that failed (err) while the old
// container still had its name. The new one goes first. Only then is the
// old one started again, if it ran, so that never two copies run.
func (x Executor) putBackUnmoved(ctx context.Context, name, newID string, old engine.Container, err error) error {
	if derr := x.RemoveNew(ctx, name, newID); derr != nil {
		return notPutBack(name, errors.Join(err, derr, fmt.Errorf("the old %s stays stopped", name)))
	}
	// Unmoved only as far as this recreate knows. The engine may have done
	// a rename aside though it said otherwise, or could not say. The old
	// one would then start under the aside name, beside the service the
	// next apply creates. So the engine says under which name it is.
	if nerr := x.putBackName(ctx, name, old.ID); nerr != nil {
		return notPutBack(name, errors.Join(err, nerr, fmt.Errorf("the old %s stays stopped", name)))
	}
	if rerr := x.restart(ctx, name, old); rerr != nil {
		return notPutBack(name, errors.Join(err, rerr))
	}
	return fmt.Errorf("%w; the old container was put back", err)
}

// putBackName puts container id back under name. It renames only when the
// engine says id is under another name. A lookup that fails is made again
// (askAgain): the old one is never started without it.
func (x Executor) putBackName(ctx context.Context, name, id string) error {
	var c engine.Container
	err := askAgain(ctx, func(ctx context.Context) (err error) {
		c, err = x.Engine.Inspect(ctx, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("look up the old %s: %w", name, err)
	}
	if c.Name == name {
		return nil
	}
	return wrapErr("rename the old "+name+" back from "+c.Name, x.Rename(CleanupContext(ctx), id, name))
}

// putBackTries is how many times a put-back makes a lookup, a start or a
// removal that failed. A call that hangs is given up on after SignalGrace
// once a signal came, and the next one may be answered.
const putBackTries = 3

// askAgain makes call, a put-back's lookup, start or removal, each time
// with a fresh cleanup context. It tries again on an error other than not
// found, up to putBackTries times in all. Each call is safe to repeat. The
// engine answers a start of a running container with no error.
func askAgain(ctx context.Context, call func(ctx context.Context) error) error {
	var err error
	for range putBackTries {
		if err = call(CleanupContext(ctx)); err == nil || engine.IsNotFound(err) {
			return err
		}
	}
	return err
}

// OldLeftError is a recreate that replaced its container but could not
// remove the old one. The new one runs, healthy, under the name. The old
// one is left aside and stopped as NAME.meshctl-old. A start-first
// recreate leaves it as Aside, NAME.meshctl-retiring. Its retirement may
// have failed before the stop, and Left says whether it still runs.
// Nothing may start it again, or two copies of the service would run. The
// next apply's heal removes it, stopping it first (coord.HealClaims). So
// does the next recreate of the name.
type OldLeftError struct {
	Name  string
	Aside string // "": OldName(Name)
	Left  string // LeftStopped, LeftRunning or LeftUnknown; "": LeftStopped
	Err   error
}

func (e *OldLeftError) Error() string {
	aside := e.Aside
	if aside == "" {
		aside = OldName(e.Name)
	}
	switch e.Left {
	case LeftRunning:
		return fmt.Sprintf("%s replaced, but the old one could not be retired: %v; it still runs, aside, as %s; the next apply stops and removes it", e.Name, e.Err, aside)
	case LeftUnknown:
		return fmt.Sprintf("%s replaced, but the old one could not be retired: %v; it may still run, aside, as %s; the next apply stops and removes it", e.Name, e.Err, aside)
	}
	return fmt.Sprintf("%s replaced, but the old one could not be removed: %v; it stays aside, stopped, as %s; the next apply removes it", e.Name, e.Err, aside)
}

func (e *OldLeftError) Unwrap() error { return e.Err }

// RemoveGone removes container id and makes sure it is gone. An engine
// that refused once, or whose answer was lost, is asked again. Then it is
// asked whether the container still exists, before anyone acts on it. A
// removal already under way in the engine is waited out (settled).
func (x Executor) RemoveGone(ctx context.Context, id string) error {
	err := x.Engine.Remove(ctx, id)
	if err == nil || engine.IsNotFound(err) {
		return nil
	}
	if err2 := x.Engine.Remove(ctx, id); err2 == nil || engine.IsNotFound(err2) {
		return nil
	}
	if _, ierr := x.settled(ctx, id); engine.IsNotFound(ierr) {
		return nil
	}
	return err
}

// StateRemoving is the engine's state of a container being removed.
const StateRemoving = "removing"

// settlePoll is how often settled asks again while a removal is under way.
const settlePoll = 100 * time.Millisecond

// settled inspects container id once no removal of it is under way. A
// removal whose answer was lost may still be running in the engine. So may
// one another command sent. The container reads StateRemoving until it is
// gone. settled waits that out, bounded by ctx. Then it returns the
// container as it reads, removing or not.
func (x Executor) settled(ctx context.Context, id string) (engine.Container, error) {
	for {
		c, err := x.Engine.Inspect(ctx, id)
		if err != nil || c.State != StateRemoving {
			return c, err
		}
		select {
		case <-ctx.Done():
			return c, nil
		case <-time.After(settlePoll):
		}
	}
}

// Rename renames container id to the name to, and makes sure of the
// outcome. A rename the engine refused, or whose answer was lost, is
// looked up by its new name. One the engine did all the same is no error.
// Every path that renames a service decides from it what to start next.
// That holds for aside, back, and to its name.
func (x Executor) Rename(ctx context.Context, id, to string) error {
	err := x.Engine.Rename(ctx, id, to)
	if err == nil {
		return nil
	}
	if c, ierr := x.Engine.Inspect(CleanupContext(ctx), to); ierr == nil && c.ID == id {
		return nil
	}
	return err
}

// renameAside renames old out of the way of its replacement, as
// OldName (moveAside).
func (x Executor) renameAside(ctx context.Context, name string, old engine.Container) error {
	return x.moveAside(ctx, old, OldName(name))
}

// moveAside renames old to aside, OldName or a start-first recreate's
// RetiringName. A container already under that name was left by a
// recreate that died or failed half way. It is not the service, since the
// service is old, which exists. So if the leftover is ours, it goes.
func (x Executor) moveAside(ctx context.Context, old engine.Container, aside string) error {
	err := x.Rename(ctx, old.ID, aside)
	if err == nil {
		return nil
	}
	left, ierr := x.Engine.Inspect(ctx, aside)
	if ierr != nil || left.ID == old.ID || left.Labels[LabelManaged] != x.Scope {
		return err
	}
	if rerr := x.Engine.Remove(ctx, left.ID); rerr != nil {
		return errors.Join(err, fmt.Errorf("remove leftover %s: %w", aside, rerr))
	}
	return x.Rename(ctx, old.ID, aside)
}

// stopped asks the engine whether container id is stopped or gone. After
// a stop that failed, or whose answer was lost, the engine may have done it
// all the same.
func (x Executor) stopped(ctx context.Context, id string) bool {
	c, err := x.Engine.Inspect(CleanupContext(ctx), id)
	return engine.IsNotFound(err) || err == nil && !c.Running
}

// PutBack undoes a recreate of name that did not finish. It removes the
// new container newID, which is "" when none was made. It renames old, the
// container set aside, back to name. It starts old if it ran
// (old.Running). A failed recreate calls it. So does the next apply, for
// one whose apply died mid-way (coord.HealClaims). It runs even after a
// signal.
//
// Each step is taken only once the engine has said the one before it is
// done. While the failed new container may still hold the name, the old
// one is neither renamed back nor started. So never two copies of the
// service run. It fails closed, and the old one stays aside, stopped, for
// the next apply.
func (x Executor) PutBack(ctx context.Context, name, newID string, old engine.Container) error {
	ctx = CleanupContext(ctx)
	if newID != "" {
		if err := x.removeAgain(ctx, newID); err != nil {
			return notPutBack(name, fmt.Errorf("put the old %s back: remove the failed new one: %w; the old one stays aside, stopped, as %s", name, err, OldName(name)))
		}
	}
	// A fresh context: the removal may have used up the last one's grace.
	if err := x.Rename(CleanupContext(ctx), old.ID, name); err != nil {
		return notPutBack(name, fmt.Errorf("put the old %s back: rename it back: %w; it stays aside, stopped, as %s", name, err, OldName(name)))
	}
	if err := x.restart(ctx, name, old); err != nil {
		return notPutBack(name, fmt.Errorf("put the old %s back: %w", name, err))
	}
	return nil
}

// NotPutBackError is a put-back of Name that could not leave the old
// container as it was. That is under its name, and running if it ran. It
// stays aside, or stopped. An apply keeps its claim on Name
// (coord.HeldClaim.Keep). So the next command's heal (coord.HealClaims)
// finishes the put-back.
type NotPutBackError struct {
	Name string
	Err  error
}

func (e *NotPutBackError) Error() string { return e.Err.Error() }
func (e *NotPutBackError) Unwrap() error { return e.Err }

func notPutBack(name string, err error) error { return &NotPutBackError{Name: name, Err: err} }

func (x Executor) restart(ctx context.Context, name string, old engine.Container) error {
	if !old.Running {
		return nil
	}
	return wrapErr("start the old "+name+" again", askAgain(ctx, func(ctx context.Context) error { return x.Start(ctx, old) }))
}

// Remove stops and removes c. Its named volumes stay.
func (x Executor) Remove(ctx context.Context, c engine.Container) error {
	if c.Running {
		if err := x.Engine.Stop(ctx, c.ID, StopTimeoutOf(c)); err != nil {
			return fmt.Errorf("stop %s: %w", c.Name, err)
		}
	}
	if err := x.Engine.Remove(ctx, c.ID); err != nil {
		return fmt.Errorf("remove %s: %w", c.Name, err)
	}
	return nil
}

// CleanupContext returns a context that survives ctx's cancellation. It is
// bounded by cleanupTimeout from now, and by SignalGrace after a signal
// (Cleanup). Cleanup after SIGINT must still happen, but not forever. Make
// it at the moment of the cleanup, never earlier.
func CleanupContext(ctx context.Context) context.Context {
	c, cancel := Cleanup(ctx, cleanupTimeout)
	_ = cancel // released by its timer; the context lives as long as the cleanup
	return c
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}
