package window

import (
	"context"
	"errors"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
)

// claimWait bounds how long a window waits for an apply's claim on the
// containers it would hold. At worst, that is the apply's health waits.
const claimWait = 30 * time.Minute

// recordUnclaimed records the hold once no apply claims the containers it
// holds. An apply carrying out its plan finishes with them first, health
// waits included. Nothing is stopped before.
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
