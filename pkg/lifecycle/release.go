package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// resumeTimeout bounds bringing one held container back: setting its
// restart policy and starting it.
const resumeTimeout = 2 * time.Minute

// Resume brings back a container that a window held, as the window's close
// does: the same container, its restart policy set to policy ("" keeps the
// default), started if it does not run. It works after a signal too: its
// context is made here, bounded.
func (x Executor) Resume(ctx context.Context, c engine.Container, policy string) error {
	ctx, cancel := Cleanup(ctx, resumeTimeout)
	defer cancel()
	if policy == "" {
		policy = mesh.DefaultRestart
	}
	if err := x.EnsureNetworks(ctx, recordedNetworks(c)); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	if err := x.Engine.SetRestart(ctx, c.ID, policy); err != nil {
		return fmt.Errorf("restore restart policy %s of %s: %w", policy, c.Name, err)
	}
	if err := x.Engine.Start(ctx, c.ID); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	return nil
}

// Windows is the state directory's windows as one engine listing classifies
// them (ObserveWindows), with that listing.
type Windows struct {
	Holds      holds.Doc
	History    holds.History
	Classified []holds.Classified
	// Observed is the listing of the state directory's containers, made
	// after every window's lock was checked; Release updates which of
	// them run.
	Observed []engine.Container
}

// ListingError is an engine listing that failed where the windows' states
// needed it.
type ListingError struct{ Err error }

func (e *ListingError) Error() string { return "list containers: " + e.Err.Error() }
func (e *ListingError) Unwrap() error { return e.Err }

// ObserveWindows reads the holds and the window history with read (a
// snapshot, or lock.Read under the state lock) and classifies each hold
// (holds.Liveness): every window's lock first, then one listing of the
// state directory's containers, kept in Observed. It changes nothing:
// status calls it alone; apply and a window's open call Release next,
// under the state lock. A listing that fails is a *ListingError.
func ObserveWindows(ctx context.Context, d *state.Dir, read func(string, state.Document) (bool, error),
	eng engine.Client, scope string, now time.Time) (*Windows, error) {
	hd, hist, err := holds.Read(read)
	if err != nil {
		return nil, err
	}
	w := &Windows{Holds: hd, History: hist}
	classified, listErr, err := holds.Liveness{Dir: d}.Classify(&w.Holds, now, Observe(ctx, eng, scope, &w.Observed))
	if err != nil {
		return nil, err
	}
	if listErr != nil {
		return nil, &ListingError{Err: listErr}
	}
	w.Classified = classified
	return w, nil
}

// RestartPolicies returns the restart policy each desired container is
// created with, by engine name; a later list wins over an earlier one.
func RestartPolicies(scope string, desired ...[]Desired) map[string]string {
	out := map[string]string{}
	for _, list := range desired {
		for i := range list {
			out[list[i].Name] = list[i].EngineSpec(scope).Restart
		}
	}
	return out
}

// Release releases, under lock, the holds of the dead (stale) windows and
// brings the containers they held back (releaseStale), each with the
// restart policy policies gives it (called only when there is a hold to
// release), else the one recorded at open. Observed is updated with which
// of them run now, so the plan that follows sees the engine as it is. It
// returns how many windows it released.
func (w *Windows) Release(ctx context.Context, lock *state.Lock, x Executor, policies func() map[string]string,
	now time.Time, progress func(string, ...any)) (int, error) {
	back, moved, n, err := x.releaseStale(ctx, lock, w, policies, now, progress)
	if err != nil {
		return n, err
	}
	if moved {
		// A container was put back: names and ids moved; the plan reads the
		// engine as it is now.
		list, err := x.Engine.List(ctx, Managed(x.Scope))
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

// releaseStale releases, under lock, the holds of the dead windows in w:
// the dead windows' step containers are removed first (a start one sent
// before it died may still be under way in the engine; one that cannot be
// removed fails the release, and the holds stay), then each held container
// is brought back as its window's close would have done (Resume, with the
// restart policy policyOf names, else the one recorded at open),
// and the holds file and the history are written. Whatever instant a
// window died at, the containers it held run again with their policy.
//
// A window killed while the engine stopped a held container leaves that
// stop to finish without it: the container still reads running, and would
// be stopped for good just after a plain start. One that runs with restart
// policy "no" (the window set it before stopping) is therefore stopped
// first, which waits for a stop in flight, then started.
//
// A window killed in its close's recreate of a held container (a change an
// apply deferred) left the container it held aside as NAME.meshctl-old,
// with perhaps an unverified new one under the name, or under its
// temporary name (NewName, perhaps running: a recreate starts the new one
// before the renames): the stale hold is that recreate's marker. The new
// one is removed before anything comes back (removeDeadNews) and the old
// one renamed back and brought back like the others (putBackAside); the
// plan that follows replaces it again, health gate and all.
//
// It returns, for each container it tried to bring back, whether it runs
// now, and moved when a put-back changed which container has which name
// (the listing is to be made again), so the plan that follows sees the
// engine as it is.
func (x Executor) releaseStale(ctx context.Context, lock *state.Lock, w *Windows, policyOf func() map[string]string,
	now time.Time, progress func(string, ...any)) (back map[string]bool, moved bool, n int, err error) {
	hd, hist, observed := &w.Holds, &w.History, w.Observed
	released := holds.ReleaseStale(hd, hist, w.Classified, now)
	back = map[string]bool{}
	if len(released) == 0 {
		return back, false, 0, nil
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		byName[c.Name] = c
	}
	policies := policyOf()
	// The dead windows' step containers go before anything comes back: one
	// that reads created may be a start its window sent just before it
	// died, which the engine still carries out. The engine does a
	// container's start and remove one after the other, so once the remove
	// has returned the sweep neither runs nor can start. One that cannot be
	// removed keeps every hold: nothing is written (fail closed).
	x.stepExits(ctx, released, observed, hist)
	if err := x.removeDeadSteps(ctx, released, observed); err != nil {
		return back, false, 0, err
	}
	// So do the unverified new containers of the dead windows' closes: a
	// close's recreate starts its new one under NewName before the renames,
	// and it may run. Nothing held comes back beside one.
	begun, err := x.removeDeadNews(ctx, released, byName, progress)
	if err != nil {
		return back, false, 0, err
	}
	moved = len(begun) > 0
	for _, r := range released {
		progress("released the stale hold of window %s (%s/%s): its process %d is gone\n", r.ID, r.Module, r.Step, r.PID)
		for _, name := range r.Containers {
			c, ok := byName[name]
			if aside, asideOK := byName[OldName(name)]; asideOK && IsService(aside, x.Scope) {
				// The window died in its close's recreate of name (a change an
				// apply deferred): the container set aside is the last good
				// one, what the window held; whatever is under the name is
				// unverified. The hold was the recreate's marker.
				var err error
				if c, err = x.putBackAside(ctx, name, c, ok, aside); err != nil {
					progress("bring %s back: %v\n", name, err)
					moved = true
					continue
				}
				progress("put %s back: window %s died while its close replaced it\n", name, r.ID)
				moved, ok = true, true
			}
			if !ok || !IsService(c, x.Scope) {
				continue // missing: the plan creates it
			}
			policy, ok := policies[name]
			if !ok {
				policy = r.Restart[name]
			}
			err := x.finishDeadStop(ctx, c, begun[name])
			if err == nil {
				err = x.Resume(ctx, c, policy)
			}
			if err != nil {
				progress("bring %s back: %v\n", name, err)
				back[name] = x.runs(ctx, c)
				continue
			}
			back[name] = true
		}
	}
	if err := errors.Join(lock.Write(holds.File, hd), lock.Write(holds.HistoryFile, hist)); err != nil {
		return back, moved, 0, err
	}
	removeWindowLocks(lock.Dir(), released, progress)
	return back, moved, len(released), nil
}

// removeWindowLocks removes the lock files of the dead windows whose holds
// were just released, as their close would have: window ids are never
// reused, and a free lock is what said they were dead.
func removeWindowLocks(d *state.Dir, released []holds.Classified, progress func(string, ...any)) {
	for _, r := range released {
		l, free, err := d.TryLock(holds.LockName(r.ID))
		if err == nil && free {
			err = l.RemoveLockFile()
			l.Unlock()
		}
		if err != nil {
			progress("remove the lock file of window %s: %v\n", r.ID, err)
		}
	}
}

// stepExits writes into the history how the exited step container of each
// released window ended, when the engine can say: a window that died
// mid-step leaves its run: step to finish alone, and whether the sweep
// succeeded is what its operator wants to know.
func (x Executor) stepExits(ctx context.Context, released []holds.Classified, observed []engine.Container, hist *holds.History) {
	for _, r := range released {
		if r.StepContainer == "" {
			continue
		}
		for _, o := range observed {
			if o.Name != r.StepContainer || !IsStep(o, x.Scope) || o.Running {
				continue
			}
			ictx, cancel := Cleanup(ctx, resumeTimeout)
			full, err := x.Engine.Inspect(ictx, o.ID)
			cancel()
			if err != nil || full.State != "exited" {
				continue
			}
			for i := range hist.Windows {
				if e := &hist.Windows[i]; e.ID == r.ID && e.Result == holds.Stale && e.StepExitCode == nil {
					code := full.ExitCode
					e.StepExitCode = &code
					e.Error += fmt.Sprintf("; its step container %s exited %d", o.Name, code)
				}
			}
		}
	}
}

// putBackAside undoes a dead window's close's recreate of name: the new
// container cur (when there is one, had) is removed and the one aside
// renamed back, stopped; the release then starts it with its policy. It
// returns the container now under name.
func (x Executor) putBackAside(ctx context.Context, name string, cur engine.Container, had bool, aside engine.Container) (engine.Container, error) {
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

// finishDeadStop waits for a stop that a dead window may have left in flight on c:
// a held container that reads running with restart policy "no" (its open's
// stop), or, whatever its policy, one whose recreate its close had begun
// (begun: a close brings a container back, its policy restored, before it
// replaces it, and the recreate's stop may be in flight).
func (x Executor) finishDeadStop(ctx context.Context, c engine.Container, begun bool) error {
	if !c.Running {
		return nil
	}
	ctx, cancel := Cleanup(ctx, resumeTimeout)
	defer cancel()
	if !begun {
		full, err := x.Engine.Inspect(ctx, c.ID)
		if err != nil || full.RestartPolicy != "no" {
			return err
		}
	}
	if err := x.Engine.Stop(ctx, c.ID, StopTimeoutOf(c)); err != nil {
		return fmt.Errorf("stop %s, which its dead window may have been stopping: %w", c.Name, err)
	}
	return nil
}

// runs asks the engine whether c runs now; false when it cannot say, so
// that the plan replaces what it cannot see running.
func (x Executor) runs(ctx context.Context, c engine.Container) bool {
	ctx, cancel := Cleanup(ctx, resumeTimeout)
	defer cancel()
	full, err := x.Engine.Inspect(ctx, c.ID)
	return err == nil && full.Running
}

// removeDeadNews removes the new containers (NewName) that the dead
// windows' closes left of the containers they held: a recreate that died
// before its new one took the name, which may run (it is started before
// the renames). One that cannot be removed fails the release, and every
// hold stays (fail closed). It returns the names whose new one it removed
// (their recreate had begun: a stop of the held one may be in flight);
// byName loses them.
func (x Executor) removeDeadNews(ctx context.Context, released []holds.Classified, byName map[string]engine.Container,
	progress func(string, ...any)) (map[string]bool, error) {
	removed := map[string]bool{}
	for _, r := range released {
		for _, name := range r.Containers {
			tmp, ok := byName[NewName(name)]
			if !ok || !IsService(tmp, x.Scope) {
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
// be released, which read exited or created (never running: those holds
// would not be stale): their windows died before they could.
func (x Executor) removeDeadSteps(ctx context.Context, released []holds.Classified, observed []engine.Container) error {
	for _, c := range released {
		if c.StepContainer == "" {
			continue
		}
		for _, o := range observed {
			if o.Name == c.StepContainer && IsStep(o, x.Scope) && !o.Running {
				if err := x.Engine.Remove(cleanupContext(ctx), o.ID); err != nil && !engine.IsNotFound(err) {
					return fmt.Errorf("remove the step container %s of dead window %s, which may still start: %w; its hold stays, and %s with it",
						o.Name, c.ID, err, strings.Join(c.Containers, ", "))
				}
			}
		}
	}
	return nil
}
