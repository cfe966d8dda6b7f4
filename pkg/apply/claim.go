package apply

import (
	"context"
	"slices"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// relockWait is the least an apply waits to take the state lock again
// after carrying out its plan. Giving up would leave its record unwritten.
const relockWait = 10 * time.Minute

// executeClaimed carries out the plan with the state lock released. Under
// the lock it claims the containers the plan changes. The claim names those
// it creates, those it recreates that ran, and the held ones whose change
// it defers. A window's close waits for the claim before it drops its hold.
// Then it unlocks and executes, health waits included. It takes the state
// lock again and returns it with the claim. The caller records and
// releases them. A plan that changes nothing is a no-op, carried out under
// the lock.
func executeClaimed(ctx context.Context, d *state.Dir, lock *state.Lock, x lifecycle.Executor, items []Item, absent map[string]string,
	rep *record.Report, opts Options) (runErr error, relock *state.Lock, claim *coord.HeldClaim, err error) {
	var want coord.Claim
	for _, it := range items {
		if it.ChangesEngine() {
			want.Containers = append(want.Containers, it.Name)
		}
		switch it.Action {
		case Create:
			want.Creates = append(want.Creates, it.Name)
		case Deferred:
			// The held containers it waits for too. A close waits for a claim
			// that defers a change to one of those it holds.
			for _, n := range append([]string{it.Name}, it.Waits...) {
				if !slices.Contains(want.Defers, n) {
					want.Defers = append(want.Defers, n)
				}
			}
		case Recreate:
			if it.Observed != nil && it.Observed.Running {
				if want.Ran == nil {
					want.Ran = map[string]string{}
				}
				want.Ran[it.Name] = it.Observed.ID
				if lifecycle.StartsFirst(it.Desired, true) {
					want.StartsFirst = append(want.StartsFirst, it.Name)
				}
			}
		}
	}
	if len(want.Containers) == 0 {
		return execute(ctx, x, items, absent, rep, opts, nil), lock, nil, nil
	}
	if claim, err = coord.TakeClaim(lock, want, opts.Now()); err != nil {
		return nil, lock, nil, err
	}
	lock.Unlock()
	runErr = execute(ctx, x, items, absent, rep, opts, claim.Keep)
	lo := opts.Lock
	lo.Timeout = max(lo.Timeout, relockWait)
	// After a signal too, so that the record says what was done.
	relock, err = d.Lock(context.WithoutCancel(ctx), coord.StateLock, lo)
	if err != nil {
		claim.Abandon()
		return runErr, nil, nil, err
	}
	return runErr, relock, claim, nil
}
