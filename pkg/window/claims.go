package window

import (
	"context"
	"errors"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
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
