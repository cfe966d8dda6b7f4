package apply

import (
	"context"
	"fmt"

	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// healInterrupted puts back what an apply that died while carrying out its
// plan left behind: its claim, in dead, is recorded but dead (the caller
// found, under lock, that no recorded claim is live), and a container it was
// replacing is still aside (NAME.meshctl-old), with or without an
// unverified new NAME. The old container is what last ran healthy: it is
// renamed back and started, the unverified new one removed, and the plan
// that follows replaces it again, health gate and all. A container some
// window holds is left alone. It returns the containers as the engine has
// them now.
func healInterrupted(ctx context.Context, lock *state.Lock, eng engine.Client, scope string, observed []engine.Container,
	dead []claims.Claim, hd *holds.Doc, progress func(string, ...any)) ([]engine.Container, error) {
	if len(dead) == 0 {
		return observed, nil
	}
	held := map[string]bool{}
	for _, h := range hd.Holds {
		for _, n := range h.Containers {
			held[n] = true
		}
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		if lifecycle.IsService(c, scope) {
			byName[c.Name] = c
		}
	}
	x := lifecycle.Executor{Engine: eng, Scope: scope}
	changed := false
	for _, c := range dead {
		for _, name := range c.Containers {
			aside, ok := byName[lifecycle.OldName(name)]
			if !ok || held[name] {
				continue
			}
			// Started whatever it reads: it is what last ran healthy.
			aside.Running = true
			if err := x.PutBack(ctx, name, byName[name].ID, aside); err != nil {
				return observed, fmt.Errorf("an interrupted apply left %s aside: %w", name, err)
			}
			progress("put %s back: an apply that died while replacing it left it aside\n", name)
			changed = true
		}
	}
	// Every claim was dead: none is kept.
	if err := lock.Write(claims.File, &claims.Doc{}); err != nil {
		return observed, err
	}
	if !changed {
		return observed, nil
	}
	return eng.List(ctx, lifecycle.Managed(scope))
}
