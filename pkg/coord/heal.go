package coord

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// HealClaims heals, under lock, what dead applies left half done. It
// reads the claims, keeps the live ones, and heals the dead ones
// (healDead). It leaves alone every container a hold in w holds. A live
// window may hold an unverified new container. A dead window's hold goes
// first (ReleaseStale), once its step container is gone. only, when not
// nil, limits the heal to those names. The dead claims' parts it could
// not heal stay recorded for the next command. w.Observed is listed again
// when the engine changed. A dry run never calls it.
func HealClaims(ctx context.Context, lock *state.Lock, x lifecycle.Executor, w *Windows, only []string,
	progress func(string, ...any)) error {
	var doc ClaimsDoc
	if _, err := lock.Read(ClaimsFile, &doc); err != nil {
		return err
	}
	live, err := LiveClaimsOf(lock.Dir(), doc.Claims)
	if err != nil {
		return err
	}
	dead := slices.DeleteFunc(slices.Clone(doc.Claims), func(c Claim) bool {
		return slices.ContainsFunc(live, func(l Claim) bool { return l.ID == c.ID })
	})
	held := w.Held()
	mine := func(name string) bool { return !held[name] && (only == nil || slices.Contains(only, name)) }
	kept, changed, err := healDead(ctx, x, w.Observed, dead, mine, progress)
	if len(dead) > 0 {
		if werr := lock.Write(ClaimsFile, &ClaimsDoc{Claims: append(live, kept...)}); err == nil {
			err = werr
		}
	}
	if err != nil || !changed {
		return err
	}
	list, err := x.Engine.List(ctx, lifecycle.Managed(x.Scope))
	if err != nil {
		return &ListingError{Err: err}
	}
	w.Observed = list
	return nil
}

// healDead puts back what the applies of the dead claims left behind
// (their processes died carrying out their plans), for apply and for a
// window's open alike, under the state lock:
//
//   - a container a start-first recreate left retiring (lifecycle.RetiringName): its
//     new one had passed the gate, so the recreate is carried through (the
//     new one takes the name if it has not, the old one stops and goes);
//   - a container a claim was replacing that is still aside
//     (NAME.meshctl-old): it is what last ran healthy; the unverified new
//     NAME is removed, the old one renamed back and started; the plan that
//     follows replaces it again, health gate and all;
//   - a container a claim was creating (Claim.Creates) that is there with
//     nothing aside: its health gate was never seen through, so it is
//     removed and the plan creates it again, gate and all;
//   - a container a claim was replacing that ran (Claim.Ran), the same one
//     still under its name with nothing aside: the dead apply may have left
//     a stop of it in flight (it reads running, and stops for good a moment
//     later), or a healer before this one a start (it reads stopped, and
//     starts beside the replacement the plan makes): it is stopped, which
//     waits for either, and started;
//   - a leftover NAME.meshctl-new (lifecycle.NewName) of this state directory:
//     unverified, it is removed, before anything starts; where a claim was
//     replacing NAME, its recreate had begun (Recreate makes the new one
//     before the old one stops), so an old one it left stopped under the
//     name is started again, as the put-back would have;
//   - a leftover NAME.meshctl-old (lifecycle.OldName) of this state directory, stopped,
//     that no dead claim names, beside a container under NAME: a recreate
//     that replaced NAME but could not remove the old one (OldLeftError)
//     left it; it goes (without NAME, it may be the last good one: it
//     stays).
//
// mine says which containers the caller may heal now: a name it may not (a
// live window holds it, or it is another module's) is left as it is and
// its part of the claim kept, so that it is healed once it can be. It
// returns the dead claims (or their parts) still to heal, and whether it
// changed the engine (the caller's listing is then out of date).
func healDead(ctx context.Context, x lifecycle.Executor, observed []engine.Container, dead []Claim, mine func(name string) bool,
	progress func(string, ...any)) (kept []Claim, changed bool, err error) {
	left := deadLeft{byName: map[string]engine.Container{}}
	for _, c := range observed {
		if lifecycle.IsService(c, x.Scope) {
			left.byName[c.Name] = c
		}
	}
	left.forward = forwardable(left.byName, dead, mine)
	if left.begun, changed, err = removeLeftNews(ctx, x, observed, left.forward, mine, progress); err != nil {
		return dead, changed, err
	}
	for i, c := range dead {
		for _, name := range c.Containers {
			if !mine(name) {
				continue // its part of the claim is kept, below
			}
			healed, err := healName(ctx, x, &left, c, name, progress)
			if err != nil {
				return append(kept, dead[i:]...), changed, err
			}
			changed = changed || healed
		}
		if part, ok := c.Part(func(name string) bool { return !mine(name) }); ok {
			kept = append(kept, part)
		}
	}
	removed, err := removeLeftAside(ctx, x, observed, left.byName, dead, mine, progress)
	return kept, changed || removed, err
}

// deadLeft is what the dead claims left on the engine, as HealDead reads it
// before healing a name.
type deadLeft struct {
	byName  map[string]engine.Container // the services, by name
	forward map[string]bool             // start-first recreates to carry through (forwardable)
	begun   map[string]bool             // names whose leftover NAME.meshctl-new was removed: their recreate had begun
}

// forwardable names the containers of the dead claims that a start-first
// recreate, dead once its new container had passed the gate, left
// retiring (lifecycle.RetiringName), among those the caller may heal (mine): the
// recreate is carried through, its new container kept.
func forwardable(byName map[string]engine.Container, dead []Claim, mine func(name string) bool) map[string]bool {
	forward := map[string]bool{}
	for _, c := range dead {
		for _, name := range c.Containers {
			if _, ok := byName[lifecycle.RetiringName(name)]; ok && mine(name) {
				forward[name] = true
			}
		}
	}
	return forward
}

// removeLeftNews removes the leftover NAME.meshctl-new containers (lifecycle.NewName)
// of this state directory whose NAME the caller may heal (mine), except
// where a start-first recreate is carried through (forward): unverified,
// they go before anything starts. It returns the names whose new one it
// removed (their recreate had begun), and whether it removed any.
func removeLeftNews(ctx context.Context, x lifecycle.Executor, observed []engine.Container, forward map[string]bool, mine func(name string) bool,
	progress func(string, ...any)) (begun map[string]bool, removed bool, err error) {
	begun = map[string]bool{}
	for _, c := range observed {
		base, isNew := strings.CutSuffix(c.Name, lifecycle.NewName(""))
		if !isNew || c.Labels[lifecycle.LabelManaged] != x.Scope || !mine(base) || forward[base] {
			continue
		}
		begun[base] = true
		if err := x.RemoveGone(lifecycle.CleanupContext(ctx), c.ID); err != nil {
			return begun, removed, fmt.Errorf("remove %s, left by a command that died: %w", c.Name, err)
		}
		progress("removed %s: a command that died left it, unverified\n", c.Name)
		removed = true
	}
	return begun, removed, nil
}

// healName heals what dead claim c left of its container name (see
// HealDead, whose cases it takes in order), and says whether it changed
// the engine.
func healName(ctx context.Context, x lifecycle.Executor, left *deadLeft, c Claim, name string, progress func(string, ...any)) (bool, error) {
	cur, exists := left.byName[name]
	aside, isAside := left.byName[lifecycle.OldName(name)]
	switch {
	case left.forward[name]:
		done, err := finishStartFirst(ctx, x, name, left.byName)
		if err != nil {
			return false, fmt.Errorf("an interrupted start-first recreate of %s: %w", name, err)
		}
		progress("%s: a start-first recreate that died was %s\n", name, done)
	case isAside:
		newID := ""
		if exists {
			newID = cur.ID
		}
		// Started whatever it reads: it is what last ran healthy.
		aside.Running = true
		if err := x.PutBack(ctx, name, newID, aside); err != nil {
			return false, fmt.Errorf("an interrupted apply left %s aside: %w", name, err)
		}
		progress("put %s back: an apply that died while replacing it left it aside\n", name)
	case exists && slices.Contains(c.Creates, name):
		if err := x.RemoveGone(lifecycle.CleanupContext(ctx), cur.ID); err != nil {
			return false, fmt.Errorf("remove %s, which an interrupted apply created unverified: %w", name, err)
		}
		progress("removed %s: an apply that died while creating it never saw it healthy; the plan creates it again\n", name)
	case exists && c.Ran[name] == cur.ID:
		if err := putBackInPlace(ctx, x, name, cur); err != nil {
			return false, fmt.Errorf("an interrupted apply left %s: %w", name, err)
		}
		progress("restarted %s: an apply that died while replacing it may have left its stop or start in flight\n", name)
	case exists && left.begun[name] && !cur.Running:
		if err := x.StartOld(ctx, name, cur); err != nil {
			return false, fmt.Errorf("an interrupted apply left %s stopped: %w", name, err)
		}
		progress("put %s back: an apply that died while replacing it left it stopped\n", name)
	default:
		return false, nil
	}
	return true, nil
}

// removeLeftAside removes the NAME.meshctl-old containers (lifecycle.OldName) of this
// state directory that a recreate which replaced NAME could not remove:
// stopped, no dead claim naming NAME, and a container under NAME.
func removeLeftAside(ctx context.Context, x lifecycle.Executor, observed []engine.Container, byName map[string]engine.Container,
	dead []Claim, mine func(name string) bool, progress func(string, ...any)) (bool, error) {
	claimed := map[string]bool{}
	for _, c := range dead {
		for _, n := range c.Containers {
			claimed[n] = true
		}
	}
	removed := false
	for _, c := range observed {
		base, isOld := strings.CutSuffix(c.Name, lifecycle.OldName(""))
		if !isOld || !lifecycle.IsService(c, x.Scope) || c.Running || claimed[base] || !mine(base) {
			continue
		}
		if _, ok := byName[base]; !ok {
			continue
		}
		if err := x.RemoveGone(lifecycle.CleanupContext(ctx), c.ID); err != nil {
			return removed, fmt.Errorf("remove %s, which a recreate of %s left: %w", c.Name, base, err)
		}
		progress("removed %s: a recreate replaced %s but could not remove it\n", c.Name, base)
		removed = true
	}
	return removed, nil
}

// finishStartFirst carries through the start-first recreate of name that
// died once its new container had passed the gate (the old one is
// retiring): the new one takes the name if it has not, and the old one
// stops and goes. With no new one left, the old one takes its name back,
// and is started if the death left it stopped. It says what it did.
func finishStartFirst(ctx context.Context, x lifecycle.Executor, name string, byName map[string]engine.Container) (string, error) {
	aside := byName[lifecycle.RetiringName(name)]
	if _, ok := byName[name]; !ok {
		tmp, ok := byName[lifecycle.NewName(name)]
		if !ok {
			if err := x.Rename(lifecycle.CleanupContext(ctx), aside.ID, name); err != nil {
				return "", fmt.Errorf("rename %s back: %w", lifecycle.RetiringName(name), err)
			}
			return "put back", x.StartOld(ctx, name, aside)
		}
		if err := x.Rename(ctx, tmp.ID, name); err != nil {
			return "", fmt.Errorf("rename %s to its name: %w", lifecycle.NewName(name), err)
		}
	}
	cctx := lifecycle.CleanupContext(ctx)
	if err := lifecycle.StopThrough(cctx, x.Engine, aside.ID, lifecycle.StopTimeoutOf(aside)); err != nil {
		return "", fmt.Errorf("stop the old one: %w", err)
	}
	if err := x.RemoveGone(cctx, aside.ID); err != nil {
		return "", fmt.Errorf("remove the old one: %w", err)
	}
	return "carried through", nil
}

// putBackInPlace stops old, under name, and starts it: a stop in flight is
// waited for, and a start in flight is carried out by the engine before the
// stop; either way it runs after, as the put-back would have left it.
func putBackInPlace(ctx context.Context, x lifecycle.Executor, name string, old engine.Container) error {
	if err := lifecycle.StopThrough(lifecycle.CleanupContext(ctx), x.Engine, old.ID, lifecycle.StopTimeoutOf(old)); err != nil {
		return fmt.Errorf("stop it to settle what the dead command left in flight: %w", err)
	}
	return x.StartOld(ctx, name, old)
}
