package coord

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
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
	live, err := liveClaimsOf(lock.Dir(), doc.Claims)
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

// healDead puts back what dead applies left behind. Their processes died
// carrying out their plans. Apply and a window's open both call it, under
// the state lock. It heals these cases, in this order:
//
//   - A start-first recreate left the old one retiring (RetiringName). Its
//     new one had passed the gate, so the recreate is carried through.
//   - A claimed container is still aside (OldName). It is what last ran
//     healthy. The unverified new one goes, and the old one is put back,
//     started. The plan that follows replaces it again, gate and all.
//   - A claimed create (Claim.Creates) is there with nothing aside. Its
//     gate was never seen through. It goes, and the plan creates it again.
//   - A claimed start-first recreate whose old one is still under the
//     name never stopped it. The old one runs on, untouched.
//   - A claimed container that ran (Claim.Ran) is still under its name,
//     with nothing aside. A stop or a start of it may be in flight. It is
//     stopped, which waits for either, and started (putBackInPlace).
//   - A leftover NewName is unverified. It goes before anything starts.
//     Its recreate had begun, so an old one left stopped is started again.
//   - A leftover OldName or RetiringName beside a container under the name
//     is what a recreate could not remove (OldLeftError). No dead claim
//     names it, so it goes, stopped first if it runs. Without the name
//     beside it, one that runs takes the name back. One stopped may be the
//     last good one, and it stays.
//
// mine says which names the caller may heal now. A name it may not is left
// as it is. A live window may hold it, or it is another module's. That
// name's part of the claim is kept, to heal once it can be. healDead
// returns the dead claims, or their parts, still to heal. It also says
// whether it changed the engine, so the caller lists it again.
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
	if err != nil {
		return kept, changed || removed, err
	}
	back, err := putBackLeftHeld(ctx, x, observed, left.byName, mine, progress)
	return kept, changed || removed || back, err
}

// deadLeft is what the dead claims left on the engine. healDead reads it
// before it heals a name.
type deadLeft struct {
	byName  map[string]engine.Container // the services, by name
	forward map[string]bool             // start-first recreates to carry through (forwardable)
	begun   map[string]bool             // names whose leftover NAME.meshctl-new was removed: their recreate had begun
}

// forwardable names the dead claims' containers whose start-first recreate
// is carried through. Each died after its new container passed the gate,
// so the old one reads retiring (RetiringName). Only names the caller may
// heal (mine) count.
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

// removeLeftNews removes this state directory's leftover NewName
// containers. They are unverified, so they go before anything starts. It
// skips names the caller may not heal (mine) and recreates carried
// through (forward). It returns the names whose new one it removed, whose
// recreate had begun. It also says whether it removed any.
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

// healName heals what dead claim c left of its container name. It takes
// healDead's cases in order. It says whether it changed the engine.
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
	case isAside && aside.State == lifecycle.StateRemoving:
		// The dead apply was removing the old one, which a recreate does only
		// once the new one passed its gate. The recreate is done. Putting the
		// old one back would remove the healthy new one, and then find the
		// old one gone.
		progress("%s: an apply that died had replaced it; %s is being removed\n", name, lifecycle.OldName(name))
		return false, nil
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
	case exists && c.Ran[name] == cur.ID && slices.Contains(c.StartsFirst, name):
		// Its new one had not passed the gate, or the old one would read
		// retiring. So the old one was never stopped, and it serves on.
		progress("%s: a start-first recreate that died before its new one's gate left the old one running; it runs on\n", name)
		return false, nil
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

// removeLeftAside removes the containers a recreate set aside and could
// not remove. Each is an OldName, or a start-first recreate's RetiringName.
// No dead claim names its name, and a container has that name. That one is
// the service. A leftover that runs is stopped first, so never two copies
// of the service serve. One that runs with nothing under the name is the
// service. It is renamed back instead.
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
		base, ok := lifecycle.AsideOf(c.Name)
		if !ok || !lifecycle.IsService(c, x.Scope) || claimed[base] || !mine(base) {
			continue
		}
		if _, ok := byName[base]; !ok {
			if !c.Running {
				continue // it may be the last good one
			}
			// The only copy of the service that runs. It takes its name back.
			if err := x.Rename(lifecycle.CleanupContext(ctx), c.ID, base); err != nil {
				return removed, fmt.Errorf("rename %s, which a recreate of %s left running, back: %w", c.Name, base, err)
			}
			progress("put %s back as %s: a recreate left it running aside\n", c.Name, base)
			byName[base], removed = c, true
			continue
		}
		if err := removeAside(ctx, x, c); err != nil {
			return removed, fmt.Errorf("remove %s, which a recreate of %s left: %w", c.Name, base, err)
		}
		progress("removed %s: a recreate replaced %s but could not remove it\n", c.Name, base)
		removed = true
	}
	return removed, nil
}

// putBackLeftHeld puts back each normal container a changed hold set
// aside (lifecycle.HeldName) that no hold records any more. A changed
// copy under the name goes first, stopped. The normal one takes its name
// back and runs with the restart policy of its spec. Beside a container
// that is not a changed copy, the one aside is a leftover, and goes. It
// says whether it changed the engine.
func putBackLeftHeld(ctx context.Context, x lifecycle.Executor, observed []engine.Container, byName map[string]engine.Container,
	mine func(name string) bool, progress func(string, ...any)) (bool, error) {
	changed := false
	for _, c := range observed {
		base, ok := lifecycle.HeldOf(c.Name)
		if !ok || !lifecycle.IsService(c, x.Scope) || !mine(base) {
			continue
		}
		cur, there := byName[base]
		if there && cur.Labels[lifecycle.LabelWindow] != "" {
			if err := removeAside(ctx, x, cur); err != nil {
				return changed, fmt.Errorf("remove the changed %s that no window holds: %w", base, err)
			}
			progress("removed the changed %s: no window holds it\n", base)
			delete(byName, base)
			changed, there = true, false
		}
		if there {
			if err := removeAside(ctx, x, c); err != nil {
				return changed, fmt.Errorf("remove %s, left beside %s: %w", c.Name, base, err)
			}
			progress("removed %s: %s runs under the name\n", c.Name, base)
			changed = true
			continue
		}
		if err := x.Rename(lifecycle.CleanupContext(ctx), c.ID, base); err != nil {
			return changed, fmt.Errorf("rename %s back to %s: %w", c.Name, base, err)
		}
		changed = true
		c.Name = base
		byName[base] = c
		if err := BringBack(ctx, x, c, specRestart(c)); err != nil {
			return changed, err
		}
		progress("put %s back: no window holds it changed\n", base)
	}
	return changed, nil
}

// specRestart is the restart policy c's spec label records, "" when it
// cannot be read.
func specRestart(c engine.Container) string {
	s, err := mesh.DecodeSpec(c.Labels[lifecycle.LabelSpec])
	if err != nil {
		return ""
	}
	return s.Restart
}

// removeAside stops c if it runs, then removes it. A stop that fails
// leaves the removal to kill it, since the service runs under its name.
// Each call has its own bounded context, made as it starts.
func removeAside(ctx context.Context, x lifecycle.Executor, c engine.Container) error {
	var serr error
	if c.Running {
		serr = lifecycle.StopThrough(lifecycle.CleanupContext(ctx), x.Engine, c.ID, lifecycle.StopTimeoutOf(c))
		if engine.IsNotFound(serr) {
			serr = nil
		}
	}
	if err := x.RemoveGone(lifecycle.CleanupContext(ctx), c.ID); err != nil {
		if serr != nil {
			err = errors.Join(fmt.Errorf("stop it: %w", serr), err)
		}
		return err
	}
	return nil
}

// finishStartFirst carries through a start-first recreate of name. It died
// once its new container had passed the gate, so the old one reads
// retiring. The new one takes the name if it has not, and the old one
// stops and goes. With no new one left, the old one is put back under its
// name, started if it was stopped. It says what it did.
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
	// The dead apply may have sent the old one's removal, still under way.
	// Its stop would then fail. The removal is waited out (RemoveGone).
	if aside.State != lifecycle.StateRemoving {
		err := lifecycle.StopThrough(cctx, x.Engine, aside.ID, lifecycle.StopTimeoutOf(aside))
		if err != nil && !engine.IsNotFound(err) {
			return "", fmt.Errorf("stop the old one: %w", err)
		}
	}
	if err := x.RemoveGone(cctx, aside.ID); err != nil {
		return "", fmt.Errorf("remove the old one: %w", err)
	}
	return "carried through", nil
}

// putBackInPlace puts old back where it stands, under name. It stops old,
// which waits for a stop in flight. The engine carries out a start in
// flight before that stop. Then it starts old, as a put-back would.
func putBackInPlace(ctx context.Context, x lifecycle.Executor, name string, old engine.Container) error {
	if err := lifecycle.StopThrough(lifecycle.CleanupContext(ctx), x.Engine, old.ID, lifecycle.StopTimeoutOf(old)); err != nil {
		return fmt.Errorf("stop it to settle what the dead command left in flight: %w", err)
	}
	return x.StartOld(ctx, name, old)
}
