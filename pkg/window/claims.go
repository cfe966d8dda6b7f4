package window

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
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

// healDead, under the state lock, puts back what dead applies left on
// the containers this window would hold (coord.HealClaims). Held as they
// are, the window would hold an unverified new container, and bring back
// the wrong one while the last good one waits aside. The dead claims'
// parts on other containers stay for the next apply.
func (w *window) healDead(ctx context.Context, lock *state.Lock, x lifecycle.Executor, ws *coord.Windows) error {
	if err := coord.HealClaims(ctx, lock, x, ws, w.held, w.opts.Progress); err != nil {
		return fmt.Errorf("nothing held: %w", err)
	}
	return nil
}
