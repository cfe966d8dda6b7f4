package window

import (
	"context"
	"errors"
	"time"

	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine"
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
		var ce *claims.ClaimedError
		if !errors.As(err, &ce) {
			return stop, err
		}
		w.opts.Progress("waiting: %v\n", ce)
		if err := claims.Wait(ctx, w.d, ce.Claim, max(w.opts.Wait, claimWait)); err != nil {
			return nil, err
		}
	}
}

// checkClaims refuses to record a hold on containers an apply has claimed.
func (w *window) checkClaims(read func(string, state.Document) (bool, error)) error {
	c, claimed, err := claims.Covering(w.d, read, w.held)
	if err != nil {
		return err
	}
	if claimed {
		return &claims.ClaimedError{Claim: c}
	}
	return nil
}
