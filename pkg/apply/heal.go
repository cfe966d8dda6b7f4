package apply

import (
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// healInterrupted puts back what an apply that died while carrying out its
// plan left behind: its claim, in dead, is recorded but dead (the caller
// found, under lock, that no recorded claim is live). A recreate it was
// carrying out may have left, at any instant, an unverified new container
// under the temporary name (NAME.meshctl-new) or under NAME, and the old
// one under NAME, stopped or not, or aside (NAME.meshctl-old). The old
// container is what last ran healthy: the unverified new one is removed,
// the old one renamed back if aside and started, and the plan that follows
// replaces it again, health gate and all. A container some window holds is
// left alone. A temporary container no dead claim covers and no window
// holds (its recreate died where no claim was recorded) is removed too:
// it never passed a gate. It returns the containers as the engine has
// them now.
func healInterrupted(ctx context.Context, lock *state.Lock, eng engine.Client, scope string, observed []engine.Container,
	dead []claims.Claim, hd *holds.Doc, progress func(string, ...any)) ([]engine.Container, error) {
	held := map[string]bool{}
	for _, h := range hd.Holds {
		for _, n := range h.Containers {
			held[n] = true
		}
	}
	byName := map[string]engine.Container{}
	var temporary []string
	for _, c := range observed {
		if lifecycle.IsService(c, scope) {
			byName[c.Name] = c
			if base, ok := strings.CutSuffix(c.Name, lifecycle.NewName("")); ok && !held[base] {
				temporary = append(temporary, base)
			}
		}
	}
	if len(dead) == 0 && len(temporary) == 0 {
		return observed, nil
	}
	x := lifecycle.Executor{Engine: eng, Scope: scope}
	changed := false
	// The unverified new ones go first: only then may an old one start.
	for _, name := range temporary {
		if err := x.RemoveNew(ctx, name, byName[lifecycle.NewName(name)].ID); err != nil {
			return observed, fmt.Errorf("an interrupted recreate left %s: %w", lifecycle.NewName(name), err)
		}
		progress("removed %s: a recreate that died left it unverified\n", lifecycle.NewName(name))
		changed = true
	}
	for _, c := range dead {
		for _, name := range c.Containers {
			if held[name] {
				continue
			}
			_, begun := byName[lifecycle.NewName(name)]
			put, err := putBackInterrupted(ctx, x, name, byName, begun)
			if err != nil {
				return observed, err
			}
			if put != "" {
				progress("put %s back: an apply that died while replacing it left it %s\n", name, put)
				changed = true
			}
		}
	}
	if len(dead) > 0 {
		// Every claim was dead: none is kept.
		if err := lock.Write(claims.File, &claims.Doc{}); err != nil {
			return observed, err
		}
	}
	if !changed {
		return observed, nil
	}
	return eng.List(ctx, lifecycle.Managed(scope))
}

// putBackInterrupted puts back the old container of name, which an apply
// that died claimed (its temporary new one, if any, is gone already): it
// is what last ran healthy, so it is started whatever it reads. Where it is
// aside, the unverified new one under the name is removed and it is renamed
// back. Where nothing is aside, the container under the name is the old
// one, which the death may have left stopped: it is started only when the
// recreate had begun (begun: a temporary new one was found), so that a
// heal never starts a container that was down before. It returns where the
// old one was ("" when nothing was done).
func putBackInterrupted(ctx context.Context, x lifecycle.Executor, name string, byName map[string]engine.Container, begun bool) (string, error) {
	if aside, ok := byName[lifecycle.OldName(name)]; ok {
		aside.Running = true
		if err := x.PutBack(ctx, name, byName[name].ID, aside); err != nil {
			return "", fmt.Errorf("an interrupted apply left %s aside: %w", name, err)
		}
		return "aside", nil
	}
	old, ok := byName[name]
	if !begun || !ok || old.Running {
		return "", nil
	}
	if err := x.StartOld(ctx, name, old); err != nil {
		return "", fmt.Errorf("an interrupted apply left %s stopped: %w", name, err)
	}
	return "stopped", nil
}
