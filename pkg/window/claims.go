package window

import (
	"context"
	"errors"
	"fmt"
	"github.com/meshctl/meshctl/pkg/coord"
	"slices"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// claimWait bounds how long a window waits for an apply's claim on the
// containers it would hold: the apply's health waits, at worst.
const claimWait = 30 * time.Minute

// recordUnclaimed records the hold (record) once no apply claims the
// containers it holds: an apply carrying out its plan, health waits
// included, finishes with them first. Nothing is stopped before.
func (w *window) recordUnclaimed(ctx context.Context) ([]engine.Container, error) {
	for {
		stop, err := w.record(ctx)
		var ce *coord.ClaimedError
		if !errors.As(err, &ce) {
			return stop, err
		}
		w.opts.Progress("waiting: %v\n", ce)
		if err := coord.WaitClaim(ctx, w.d, ce.Claim, max(w.opts.Wait, claimWait)); err != nil {
			return nil, err
		}
	}
}

// checkClaims refuses to record a hold on containers an apply has claimed.
func (w *window) checkClaims(read func(string, state.Document) (bool, error)) error {
	c, claimed, err := coord.Covering(w.d, read, w.held)
	if err != nil {
		return err
	}
	if claimed {
		return &coord.ClaimedError{Claim: c}
	}
	return nil
}

// healDead, under the state lock, puts back what the dead claims of applies
// that died carrying out their plans left on the containers this window
// would hold (lifecycle.Executor.HealDead): held as they are, the window
// would hold an unverified new container, and stop and bring back the
// wrong one, while the last good one waits aside. The dead claims' parts on
// other containers stay for the next apply. ws.Observed is listed again
// when anything changed.
func (w *window) healDead(ctx context.Context, lock *state.Lock, x lifecycle.Executor, ws *lifecycle.Windows) error {
	var doc coord.ClaimsDoc
	if _, err := lock.Read(coord.ClaimsFile, &doc); err != nil {
		return err
	}
	live, err := coord.LiveClaimsOf(w.d, doc.Claims)
	if err != nil {
		return err
	}
	var dead []coord.Claim
	for _, c := range doc.Claims {
		if !slices.ContainsFunc(live, func(l coord.Claim) bool { return l.ID == c.ID }) {
			dead = append(dead, c)
		}
	}
	// A dead window's hold on one of them is released next (Release),
	// which puts the one aside back once that window's step container is
	// gone: not before.
	stale := map[string]bool{}
	for _, c := range ws.Classified {
		for _, n := range c.Containers {
			stale[n] = true
		}
	}
	mine := func(name string) bool { return slices.Contains(w.held, name) && !stale[name] }
	kept, changed, err := x.HealDead(ctx, ws.Observed, dead, mine, w.opts.Progress)
	if len(dead) > 0 {
		if werr := lock.Write(coord.ClaimsFile, &coord.ClaimsDoc{Claims: append(live, kept...)}); err == nil {
			err = werr
		}
	}
	if err != nil {
		return fmt.Errorf("nothing held: %w", err)
	}
	if changed {
		list, err := w.eng.List(ctx, lifecycle.Managed(w.scope))
		if err != nil {
			return fmt.Errorf("nothing held: list containers: %w", err)
		}
		ws.Observed = list
	}
	return nil
}
