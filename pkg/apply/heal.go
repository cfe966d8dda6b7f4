package apply

import (
	"context"
	"github.com/meshctl/meshctl/pkg/coord"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// healInterrupted puts back what the applies that died while carrying out
// their plans left behind (lifecycle.Executor.HealDead): their claims, in
// dead, are recorded but dead (the caller found, under lock, that no
// recorded claim is live). A container a window holds is left alone, and
// the dead claim's part on it kept in claims.json until an apply can heal
// it: a live window may hold the unverified new container, and the old one
// aside is what must come back once the window has closed; a dead window's
// hold is released next (release), which puts the one aside back only once
// that window's step container, whose start may still be in flight, is
// gone. A leftover NAME.meshctl-new goes too. It returns the containers as
// the engine has them now.
func healInterrupted(ctx context.Context, lock *state.Lock, eng engine.Client, scope string, observed []engine.Container,
	dead []coord.Claim, classified []coord.Classified, progress func(string, ...any)) ([]engine.Container, error) {
	held := heldNames(classified)
	x := lifecycle.Executor{Engine: eng, Scope: scope}
	kept, changed, err := x.HealDead(ctx, observed, dead, func(name string) bool { return !held[name] }, progress)
	if len(dead) > 0 {
		// Every claim was dead: those kept are the ones still to heal (on
		// an error, the one it stopped at and those after it too).
		if werr := lock.Write(coord.ClaimsFile, &coord.ClaimsDoc{Claims: kept}); err == nil {
			err = werr
		}
	}
	if err != nil {
		return observed, err
	}
	if !changed {
		return observed, nil
	}
	return eng.List(ctx, lifecycle.Managed(scope))
}

// heldNames are the containers the holds of classified hold, whatever
// their state.
func heldNames(classified []coord.Classified) map[string]bool {
	held := map[string]bool{}
	for _, c := range classified {
		for _, n := range c.Containers {
			held[n] = true
		}
	}
	return held
}
