package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine"
)

// HealDead puts back what the applies of the dead claims left behind
// (their processes died carrying out their plans), for apply and for a
// window's open alike, under the state lock:
//
//   - a container a claim was replacing that is still aside
//     (NAME.meshctl-old): it is what last ran healthy; the unverified new
//     NAME is removed, the old one renamed back and started; the plan that
//     follows replaces it again, health gate and all;
//   - a container a claim was creating (Claim.Creates) that is there with
//     nothing aside: its health gate was never seen through, so it is
//     removed and the plan creates it again, gate and all;
//   - a leftover NAME.meshctl-new (NewName) of this state directory:
//     unverified, it is removed, before anything starts; where a claim was
//     replacing NAME, its recreate had begun (Recreate makes the new one
//     before the old one stops), so an old one it left stopped under the
//     name is started again, as the put-back would have.
//
// mine says which containers the caller may heal now: a name it may not (a
// live window holds it, or it is another module's) is left as it is and
// its part of the claim kept, so that it is healed once it can be. It
// returns the dead claims (or their parts) still to heal, and whether it
// changed the engine (the caller's listing is then out of date).
func (x Executor) HealDead(ctx context.Context, observed []engine.Container, dead []claims.Claim, mine func(name string) bool,
	progress func(string, ...any)) (kept []claims.Claim, changed bool, err error) {
	byName := map[string]engine.Container{}
	for _, c := range observed {
		if IsService(c, x.Scope) {
			byName[c.Name] = c
		}
	}
	begun := map[string]bool{}
	for _, c := range observed {
		base, isNew := strings.CutSuffix(c.Name, NewName(""))
		if !isNew || c.Labels[LabelManaged] != x.Scope || !mine(base) {
			continue
		}
		begun[base] = true
		if err := x.removeGone(cleanupContext(ctx), c.ID); err != nil {
			return dead, changed, fmt.Errorf("remove %s, left by a command that died: %w", c.Name, err)
		}
		progress("removed %s: a command that died left it, unverified\n", c.Name)
		changed = true
	}
	for i, c := range dead {
		left := claims.Claim{ID: c.ID, PID: c.PID, Since: c.Since}
		for _, name := range c.Containers {
			if !mine(name) {
				left.Containers = append(left.Containers, name)
				if slices.Contains(c.Creates, name) {
					left.Creates = append(left.Creates, name)
				}
				continue
			}
			cur, exists := byName[name]
			aside, isAside := byName[OldName(name)]
			switch {
			case isAside:
				newID := ""
				if exists {
					newID = cur.ID
				}
				// Started whatever it reads: it is what last ran healthy.
				aside.Running = true
				if err := x.PutBack(ctx, name, newID, aside); err != nil {
					return append(kept, dead[i:]...), changed, fmt.Errorf("an interrupted apply left %s aside: %w", name, err)
				}
				progress("put %s back: an apply that died while replacing it left it aside\n", name)
				changed = true
			case exists && slices.Contains(c.Creates, name):
				if err := x.removeGone(cleanupContext(ctx), cur.ID); err != nil {
					return append(kept, dead[i:]...), changed, fmt.Errorf("remove %s, which an interrupted apply created unverified: %w", name, err)
				}
				progress("removed %s: an apply that died while creating it never saw it healthy; the plan creates it again\n", name)
				changed = true
			case exists && begun[name] && !cur.Running:
				if err := x.StartOld(ctx, name, cur); err != nil {
					return append(kept, dead[i:]...), changed, fmt.Errorf("an interrupted apply left %s stopped: %w", name, err)
				}
				progress("put %s back: an apply that died while replacing it left it stopped\n", name)
				changed = true
			}
		}
		if len(left.Containers) > 0 {
			kept = append(kept, left)
		}
	}
	return kept, changed, nil
}
