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
	"github.com/meshctl/meshctl/pkg/state"
)

// dependents are the containers an apply deferred because they depend on
// a held one. The hold records them beside the held ones' own deferrals.
func (w *window) dependents() []string {
	return slices.DeleteFunc(slices.Clone(w.deferred), func(n string) bool { return slices.Contains(w.held, n) })
}

// convergeDependents carries out the changes an apply deferred to the
// dependents of the held containers. It runs once those are back, and is
// given the state lock and wish, what the last apply wants. Under the lock
// it claims the dependents it changes, as an apply would. Then it unlocks
// and creates or recreates them in depends-on order, health gates
// included. It takes the lock again, drops the claim and returns the lock.
// A dependent whose dependency did not come back is not touched. After a
// signal, nothing is touched, and the next apply converges them.
func (w *window) convergeDependents(ctx context.Context, lock *state.Lock, wish map[string]*lifecycle.Desired,
	back map[string]error) (*state.Lock, error) {
	deps := w.dependents()
	if len(deps) == 0 || w.hold == nil {
		return lock, nil
	}
	if ctx.Err() != nil {
		w.opts.Progress("%s: the change an apply deferred is left to the next apply: this window was interrupted\n", strings.Join(deps, ", "))
		return lock, nil
	}
	w.dependentErrs = map[string]error{}
	listCtx, cancel := lifecycle.Cleanup(ctx, time.Minute)
	observed, err := w.eng.List(listCtx, lifecycle.Managed(w.scope))
	cancel()
	if err != nil {
		for _, name := range deps {
			w.dependentErrs[name] = fmt.Errorf("not brought to its deferred change: list containers: %w", err)
		}
		return lock, nil
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		if lifecycle.IsService(c, w.scope) {
			byName[c.Name] = c
		}
	}
	claim, todo := w.dependentsToChange(deps, wish, byName)
	if todo, err = w.unclaimed(lock, todo); err != nil {
		for _, name := range deps {
			w.dependentErrs[name] = fmt.Errorf("not brought to its deferred change: %w", err)
		}
		return lock, nil
	}
	if len(todo) == 0 {
		return lock, nil
	}
	claim, _ = claim.Part(func(name string) bool { return slices.Contains(todo, name) })
	held, err := coord.TakeClaim(lock, claim, w.opts.Now())
	if err != nil {
		for _, name := range todo {
			w.dependentErrs[name] = fmt.Errorf("not brought to its deferred change: %w", err)
		}
		return lock, nil
	}
	lock.Unlock()
	w.changeDependents(ctx, todo, wish, byName, back)
	relock, err := w.lockToClose(ctx)
	if err != nil {
		held.Abandon()
		return nil, err
	}
	return relock, held.Release(relock)
}

// unclaimed returns the names of todo that no live claim covers. An apply
// that began before the window opened may still be changing one. That one
// is left to it, and so to the next apply.
func (w *window) unclaimed(lock *state.Lock, todo []string) ([]string, error) {
	live, err := coord.LiveClaims(w.d, lock.Read)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(todo, func(name string) bool {
		for _, c := range live {
			if slices.Contains(c.Containers, name) {
				w.opts.Progress("%s: apply (pid %d) is changing it; the change deferred to it is left to it and the next apply\n", name, c.PID)
				return true
			}
		}
		return false
	}), nil
}

// dependentsToChange returns the claim on the dependents that differ from
// wish, and those dependents in depends-on order. A dependent no longer
// wanted is left to the next apply.
func (w *window) dependentsToChange(deps []string, wish map[string]*lifecycle.Desired,
	byName map[string]engine.Container) (coord.Claim, []string) {
	var claim coord.Claim
	for _, name := range deps {
		d := wish[name]
		if d == nil {
			continue
		}
		c, exists := byName[name]
		switch {
		case !exists:
			claim.Creates = append(claim.Creates, name)
		case len(lifecycle.Diff(c, d)) == 0 && engine.StateOf(c, w.opts.Now()) == engine.Running:
			continue
		case c.Running:
			if claim.Ran == nil {
				claim.Ran = map[string]string{}
			}
			claim.Ran[name] = c.ID
		}
		claim.Containers = append(claim.Containers, name)
	}
	order := lifecycle.DependencyOrder(claim.Containers, func(name string) []string {
		return wish[name].Def.Dependencies(wish[name].Module)
	})
	return claim, order
}

// changeDependents creates or recreates each dependent of todo as wish
// wants it, with the state lock released. One whose dependency is not
// back, or failed its own change, is not touched. Its error says so.
func (w *window) changeDependents(ctx context.Context, todo []string, wish map[string]*lifecycle.Desired,
	byName map[string]engine.Container, back map[string]error) {
	x := lifecycle.Executor{Engine: w.eng, Scope: w.scope, Settle: w.opts.Settle}
	for _, name := range todo {
		d := wish[name]
		if dep, failed := w.failedDependency(d, back); failed {
			w.dependentErrs[name] = fmt.Errorf("not touched: dependency %s is not back; the next apply converges it", dep)
			continue
		}
		cctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
		err := w.ensureImage(cctx, d)
		if c, exists := byName[name]; err == nil && exists {
			w.opts.Progress("recreating %s: an apply deferred its change until what it depends on came back\n", name)
			err = x.Recreate(cctx, d, c)
		} else if err == nil {
			w.opts.Progress("creating %s: an apply deferred it until what it depends on came back\n", name)
			err = x.Create(cctx, d)
		}
		cancel()
		if ol := (*lifecycle.OldLeftError)(nil); errors.As(err, &ol) {
			w.opts.Progress("warning: %v\n", err)
			err = nil
		}
		if err != nil {
			w.dependentErrs[name] = err
		}
	}
}

// failedDependency names a dependency of d that did not come back, held
// or a dependent. back holds the held containers' errors.
func (w *window) failedDependency(d *lifecycle.Desired, back map[string]error) (string, bool) {
	for _, dep := range d.Def.Dependencies(d.Module) {
		if back[dep] != nil || w.dependentErrs[dep] != nil {
			return dep, true
		}
	}
	return "", false
}
