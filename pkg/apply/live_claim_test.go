package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestApplyWaitsForALiveClaim: another apply claims m.c and is carrying out
// its plan (its health wait, with the state lock released). An apply that
// would change m.c waits for that claim, and changes nothing while it
// lives: here it gives up once its lock timeout has passed (a *BusyError
// naming the claim), the engine as it was. An apply that planned past the
// claim would replace m.c under the other's feet (such an apply once
// passed the whole suite).
func TestApplyWaitsForALiveClaim(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake("old:1", "new:1")
	if _, err := run(t, d, f, meshOf(t, "c: {image: old:1}"), nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := coord.TakeClaim(l, coord.Claim{Containers: []string{"m.c"}}, time.Now())
	l.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Abandon()
	f.Changes()
	_, err = run(t, d, f, meshOf(t, "c: {image: new:1}"), func(o *Options) { o.Lock.Timeout = 100 * time.Millisecond })
	if busy := (*state.BusyError)(nil); !errors.As(err, &busy) {
		t.Errorf("apply beside a live claim on m.c: %v, want it to wait for the claim, then give up (a *state.BusyError)", err)
	}
	if ch := f.Changes(); len(ch) != 0 {
		t.Errorf("apply beside a live claim on m.c changed the engine: %q", ch)
	}
}
