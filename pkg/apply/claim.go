package apply

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/applied"
	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// relockWait is the least an apply waits to take the state lock again
// after carrying out its plan: giving up would leave its record unwritten.
const relockWait = 10 * time.Minute

// executeClaimed carries out the plan with the state lock released: under
// lock it claims the containers the plan changes, unlocks, executes (health
// waits included), and takes the state lock again, which it returns with
// the claim for the caller to record and release. A plan that changes
// nothing is carried out (a no-op) under lock.
func executeClaimed(ctx context.Context, d *state.Dir, lock *state.Lock, x lifecycle.Executor, items []Item, absent map[string]string,
	rep *applied.Report, opts Options) (runErr error, relock *state.Lock, claim *claims.Held, err error) {
	var names, creates []string
	for _, it := range items {
		if it.ChangesEngine() {
			names = append(names, it.Name)
		}
		if it.Action == Create {
			creates = append(creates, it.Name)
		}
	}
	if len(names) == 0 {
		return execute(ctx, x, items, absent, rep, opts), lock, nil, nil
	}
	if claim, err = claims.Take(lock, names, creates, opts.Now()); err != nil {
		return nil, lock, nil, err
	}
	lock.Unlock()
	runErr = execute(ctx, x, items, absent, rep, opts)
	lo := opts.Lock
	lo.Timeout = max(lo.Timeout, relockWait)
	// After a signal too: the record says what was done.
	relock, err = d.Lock(context.WithoutCancel(ctx), holds.StateLock, lo)
	if err != nil {
		claim.Abandon()
		return runErr, nil, nil, err
	}
	return runErr, relock, claim, nil
}
