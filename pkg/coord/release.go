package coord

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// bringBackTimeout bounds one engine call of bringing a held container
// back after its window died.
const bringBackTimeout = 2 * time.Minute

// ReleaseStale drops, under lock, the holds of dead windows. It brings
// back the containers they held, as their close would have. Each gets its
// policy from policies, else the one recorded at open. The caller makes
// policies only when StaleCount is above zero. Observed is updated with
// what runs now, so the plan that follows sees the engine as it is. It
// returns how many windows it released. A refused apply never calls it.
func ReleaseStale(ctx context.Context, lock *state.Lock, x lifecycle.Executor, w *Windows, policies map[string]string,
	now time.Time, progress func(string, ...any)) (int, error) {
	back, moved, n, err := releaseStale(ctx, lock, x, w, policies, now, progress)
	if err != nil {
		return n, err
	}
	if moved {
		// A container was put back, so names and ids moved. The plan
		// reads the engine as it is now.
		list, err := x.Engine.List(ctx, lifecycle.Managed(x.Scope))
		if err != nil {
			return n, &ListingError{Err: err}
		}
		w.Observed = list
		return n, nil
	}
	for i := range w.Observed {
		if running, ok := back[w.Observed[i].Name]; ok {
			w.Observed[i].Running = running
		}
	}
	return n, nil
}

// releaseStale releases, under lock, the holds of the dead windows in w.
// The dead windows' step containers go first. A start sent before a
// window died may still be under way in the engine. One that cannot be
// removed fails the release, and the holds stay. Then each held container
// comes back as its close would have left it (BringBack). Last, the holds
// file and the history are written. Whatever instant a window died at,
// its containers run again with their policy.
//
// A window may die while the engine stops a held container. That stop
// goes on without it. The container still reads running, and a plain
// start now would change nothing. So one that runs with restart policy
// "no" is stopped first, which waits for the stop in flight. Then it is
// started (finishDeadStop).
//
// A window may hold a container changed. Its changed copy then runs
// under the name, and the normal one waits aside (lifecycle.HeldName).
// The copy goes first, and the normal one is renamed back (Unchange).
//
// A window may die in its close's recreate of a held container, a change
// an apply deferred. The old container then waits aside as OldName, or
// as RetiringName when the recreate was start-first. An
// unverified new one may be under the name, or under NewName, perhaps
// running. The stale hold marks that recreate. The new one goes before
// anything comes back (removeDeadNews). The old one is put back and
// brought back like the others (putBackAside). The plan that follows
// replaces it again, gate and all.
//
// It returns, for each container it tried to bring back, whether it runs
// now. moved says a put-back changed which container has which name. The
// caller then lists the engine again.
func releaseStale(ctx context.Context, lock *state.Lock, x lifecycle.Executor, w *Windows, policies map[string]string,
	now time.Time, progress func(string, ...any)) (back map[string]bool, moved bool, n int, err error) {
	hd, hist, observed := &w.Holds, &w.History, w.Observed
	released := dropStale(hd, hist, w.Classified, now)
	back = map[string]bool{}
	if len(released) == 0 {
		return back, false, 0, nil
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		byName[c.Name] = c
	}
	// The dead windows' step containers go before anything comes back.
	// One that reads created may be a start its window sent just before
	// it died. The engine does a container's start and remove one after
	// the other. So once the remove has returned, the sweep can neither
	// run nor start. One that cannot be removed keeps every hold, and
	// nothing is written (fail closed).
	stepExits(ctx, x, released, observed, hist)
	if err := removeDeadSteps(ctx, x, released, observed); err != nil {
		return back, false, 0, err
	}
	// So do the unverified new containers of the dead windows' closes. A
	// close's recreate starts its new one under NewName before the
	// renames, and it may run. Nothing held comes back beside one.
	begun, err := removeDeadNews(ctx, x, released, byName, progress)
	if err != nil {
		return back, false, 0, err
	}
	moved = len(begun) > 0
	for _, r := range released {
		progress("released the stale hold of window %s (%s/%s): its process %d is gone\n", r.ID, r.Module, r.Step, r.PID)
		if releaseOne(ctx, x, r, byName, policies, begun, back, progress) {
			moved = true
		}
	}
	if err := errors.Join(lock.Write(HoldsFile, hd), lock.Write(HistoryFile, hist)); err != nil {
		return back, moved, 0, err
	}
	removeWindowLocks(lock.Dir(), released, progress)
	return back, moved, len(released), nil
}

// releaseOne brings back the containers of r, a released hold, and sets
// back[name] to whether each runs now. It says whether a put-back moved a
// name to another container.
func releaseOne(ctx context.Context, x lifecycle.Executor, r Classified, byName map[string]engine.Container, policies map[string]string,
	begun, back map[string]bool, progress func(string, ...any)) (moved bool) {
	for _, name := range r.Containers {
		if ch, changed := r.Changed[name]; changed {
			// The changed copy goes, and the normal one takes the name back.
			// Then it comes back as any held container.
			moved = true
			if err := Unchange(ctx, x, name, byName, ch, r.ID); err != nil {
				progress("bring %s back: %v\n", name, err)
				continue
			}
		}
		c, ok := byName[name]
		if aside, asideOK := deadCloseAside(byName, name, x.Scope); asideOK {
			// The window died in its close's recreate of name. The
			// container set aside is the last good one, what the window
			// held. Whatever is under the name is unverified.
			var err error
			if c, err = putBackAside(ctx, x, name, c, ok, aside); err != nil {
				progress("bring %s back: %v\n", name, err)
				moved = true
				continue
			}
			progress("put %s back: window %s died while its close replaced it\n", name, r.ID)
			moved, ok = true, true
		}
		if !ok || !lifecycle.IsService(c, x.Scope) {
			continue // missing, so the plan creates it
		}
		policy, ok := policies[name]
		if !ok {
			policy = r.Restart[name]
		}
		err := finishDeadStop(ctx, x, c, begun[name])
		if err == nil {
			err = BringBack(ctx, x, c, policy)
		}
		if err != nil {
			progress("bring %s back: %v\n", name, err)
			back[name] = runsNow(ctx, x, c)
			continue
		}
		back[name] = true
	}
	return moved
}

// removeWindowLocks removes the lock files of the dead windows just
// released, as their close would have. Window ids are never reused. A
// free lock is what said they were dead.
func removeWindowLocks(d *state.Dir, released []Classified, progress func(string, ...any)) {
	for _, r := range released {
		l, free, err := d.TryLock(WindowLock(r.ID))
		if err == nil && free {
			err = l.RemoveLockFile()
			l.Unlock()
		}
		if err != nil {
			progress("remove the lock file of window %s: %v\n", r.ID, err)
		}
	}
}

// stepExits writes into the history how each released window's step
// container ended, when the engine can say. A window that died mid-step
// leaves its run step to finish alone. Whether the sweep succeeded is
// what its operator wants to know.
func stepExits(ctx context.Context, x lifecycle.Executor, released []Classified, observed []engine.Container, hist *History) {
	for _, r := range released {
		if r.StepContainer == "" {
			continue
		}
		for _, o := range observed {
			if o.Name != r.StepContainer || !lifecycle.IsStep(o, x.Scope) || o.Running {
				continue
			}
			ictx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
			full, err := x.Engine.Inspect(ictx, o.ID)
			cancel()
			if err != nil || full.State != "exited" {
				continue
			}
			for i := range hist.Windows {
				if e := &hist.Windows[i]; e.ID == r.ID && e.Result == Stale && e.StepExitCode == nil {
					code := full.ExitCode
					e.StepExitCode = &code
					e.Error += fmt.Sprintf("; its step container %s exited %d", o.Name, code)
				}
			}
		}
	}
}

// putBackAside undoes a dead window's close's recreate of name. The new
// container cur, when there is one (had), goes. The one aside is put back
// under name, stopped. The release then starts it with its policy. It
// returns the container now under name.
// deadCloseAside is the container a dead close's recreate of name set
// aside: OldName, or RetiringName for a start-first recreate. The one
// retiring may run, and it still answers for the service. Left there, it
// would run beside the container the next plan creates under the name.
func deadCloseAside(byName map[string]engine.Container, name, scope string) (engine.Container, bool) {
	for _, n := range []string{lifecycle.OldName(name), lifecycle.RetiringName(name)} {
		if c, ok := byName[n]; ok && lifecycle.IsService(c, scope) {
			return c, true
		}
	}
	return engine.Container{}, false
}

func putBackAside(ctx context.Context, x lifecycle.Executor, name string, cur engine.Container, had bool, aside engine.Container) (engine.Container, error) {
	newID := ""
	if had && cur.ID != aside.ID {
		newID = cur.ID
	}
	aside.Running = false
	if err := x.PutBack(ctx, name, newID, aside); err != nil {
		return engine.Container{}, err
	}
	aside.Name = name
	return aside, nil
}

// finishDeadStop waits for a stop a dead window may have left in flight
// on c. That is a held container that reads running with restart policy
// "no", stopped by the open. It is also one whose recreate the close had
// begun (begun), whatever its policy. A close brings a container back
// before it replaces it, so the recreate's stop may be in flight.
func finishDeadStop(ctx context.Context, x lifecycle.Executor, c engine.Container, begun bool) error {
	if !c.Running {
		return nil
	}
	ctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
	defer cancel()
	if !begun {
		full, err := x.Engine.Inspect(ctx, c.ID)
		if err != nil || full.RestartPolicy != "no" {
			return err
		}
	}
	if err := x.Engine.Stop(ctx, c.ID, lifecycle.StopTimeoutOf(c)); err != nil {
		return fmt.Errorf("stop %s, which its dead window may have been stopping: %w", c.Name, err)
	}
	return nil
}

// runsNow asks the engine whether c runs now. It says false when the
// engine cannot say, so the plan replaces what it cannot see running.
func runsNow(ctx context.Context, x lifecycle.Executor, c engine.Container) bool {
	ctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
	defer cancel()
	full, err := x.Engine.Inspect(ctx, c.ID)
	return err == nil && full.Running
}

// removeDeadNews removes the NewName containers the dead windows' closes
// left. Each is a recreate that died before its new one took the name.
// It may run, since a recreate starts it before the renames. One that
// cannot be removed fails the release, and every hold stays (fail
// closed). It returns the names whose new one it removed. Their recreate
// had begun, so a stop of the held one may be in flight. byName loses
// them.
func removeDeadNews(ctx context.Context, x lifecycle.Executor, released []Classified, byName map[string]engine.Container,
	progress func(string, ...any)) (map[string]bool, error) {
	removed := map[string]bool{}
	for _, r := range released {
		for _, name := range r.Containers {
			tmp, ok := byName[lifecycle.NewName(name)]
			if !ok || !lifecycle.IsService(tmp, x.Scope) {
				continue
			}
			if err := x.RemoveNew(ctx, name, tmp.ID); err != nil {
				return removed, fmt.Errorf("window %s died while its close replaced %s: %w; its hold stays, and %s stays as it is",
					r.ID, name, err, strings.Join(r.Containers, ", "))
			}
			progress("removed %s: window %s died while its close replaced %s\n", tmp.Name, r.ID, name)
			delete(byName, tmp.Name)
			removed[name] = true
		}
	}
	return removed, nil
}

// removeDeadSteps removes the step containers of the stale holds about to
// be released. They read exited or created, never running, or the holds
// would not be stale. Their windows died before they could remove them.
func removeDeadSteps(ctx context.Context, x lifecycle.Executor, released []Classified, observed []engine.Container) error {
	for _, c := range released {
		if c.StepContainer == "" {
			continue
		}
		for _, o := range observed {
			if o.Name == c.StepContainer && lifecycle.IsStep(o, x.Scope) && !o.Running {
				if err := x.Engine.Remove(lifecycle.CleanupContext(ctx), o.ID); err != nil && !engine.IsNotFound(err) {
					return fmt.Errorf("remove the step container %s of dead window %s, which may still start: %w; its hold stays, and %s with it",
						o.Name, c.ID, err, strings.Join(c.Containers, ", "))
				}
			}
		}
	}
	return nil
}

// RecordEnds records in etcd the end of each dead runner's mesh window
// whose step is over here. Such a hold reads unknown until then, since
// the other hosts hold until the end is recorded. Once it is, the hold
// reads stale, and ReleaseStale releases it. A record that fails leaves
// it unknown, for a later apply or window run to record. An end recorded
// already stands, and the hold is stale too. Call it under the state
// lock, after ObserveMesh, before the holds are used. Without it, such a
// hold stays.
func RecordEnds(ctx context.Context, x lifecycle.Executor, w *Windows, now time.Time, progress func(string, ...any)) {
	for i := range w.Classified {
		c := &w.Classified[i]
		if !c.endDue || w.mesh.Gather == nil {
			continue
		}
		end, err := stepEnd(ctx, x, c.Hold, w.Observed)
		if err == nil {
			end.At, end.By = now.UTC(), w.mesh.Host
			// One attempt, as the read: it runs under the state lock.
			rctx, cancel := context.WithTimeout(ctx, ledger.RecheckTimeout)
			err = w.mesh.Gather.RecordEnd(rctx, c.Module, c.Gathering, end)
			cancel()
		}
		var ge *ledger.GatherError
		switch {
		case errors.As(err, &ge) && ge.Kind == fault.Conflict:
			progress("mesh window %s of window %s (%s/%s): %s; that end stands\n", c.Gathering, c.ID, c.Module, c.Step, ge.Why)
		case err != nil:
			c.why = fmt.Sprintf("its mesh window %s's step is over here, but its end could not be recorded in etcd: %v", c.Gathering, err)
			c.todo = "the other hosts hold until a later apply or window run here records it"
			progress("window %s (%s/%s): %s; %s\n", c.ID, c.Module, c.Step, c.why, c.todo)
			continue
		default:
			progress("recorded the end of mesh window %s (%s/%s) for window %s, whose process died: %s\n",
				c.Gathering, c.Module, c.Step, c.ID, end)
		}
		c.State, c.why, c.todo, c.endDue = Stale, "", "", false
	}
}

// stepEnd is how the step of h, a dead runner's hold, ended. An exited
// step container gives its exit code. One created and never started is
// removed first, so it can no longer start. A step with no exit code to
// read (an exec step, a container gone) ended interrupted. An engine
// that cannot say is an error, and the hold stays.
func stepEnd(ctx context.Context, x lifecycle.Executor, h Hold, observed []engine.Container) (ledger.StepEnd, error) {
	interrupted := ledger.StepEnd{Result: "interrupted"}
	if h.StepContainer == "" {
		return interrupted, nil
	}
	for _, o := range observed {
		if o.Name != h.StepContainer || !lifecycle.IsStep(o, x.Scope) {
			continue
		}
		ictx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
		defer cancel()
		full, err := x.Engine.Inspect(ictx, o.ID)
		switch {
		case engine.IsNotFound(err):
			return interrupted, nil
		case err != nil:
			return ledger.StepEnd{}, fmt.Errorf("inspect step container %s: %w", o.Name, err)
		case full.State == "exited":
			code := full.ExitCode
			if code == 0 {
				return ledger.StepEnd{Result: "ok", Code: &code}, nil
			}
			return ledger.StepEnd{Result: "failed", Code: &code}, nil
		case full.State == "created":
			if err := x.Engine.Remove(ictx, o.ID); err != nil && !engine.IsNotFound(err) {
				return ledger.StepEnd{}, fmt.Errorf("remove step container %s, which may still start: %w", o.Name, err)
			}
			return interrupted, nil
		default:
			return ledger.StepEnd{}, fmt.Errorf("step container %s is %s", o.Name, full.State)
		}
	}
	return interrupted, nil
}
