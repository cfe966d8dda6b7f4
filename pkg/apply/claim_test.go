package apply

import (
	"context"
	"sync"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestHealthWaitWithoutTheLock: while an apply waits for its new container
// to be healthy, the state lock is free (a window can record its hold) and
// the container is claimed; once it is done, the claim is gone.
func TestHealthWaitWithoutTheLock(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake(busybox)
	var once sync.Once
	var lockFree bool
	var claimed []coord.Claim
	f.Hook = func(op, target string) {
		if op != enginetest.OpInspect || target != "m.c" {
			return
		}
		if _, exists := f.Get("m.c"); !exists {
			return // the plan's check that no one else has the name
		}
		once.Do(func() {
			// The apply is in its health wait for m.c.
			l, ok, err := d.TryLock(coord.StateLock)
			if err != nil || !ok {
				return
			}
			lockFree = true
			claimed, _ = coord.LiveClaims(d, l.Read)
			l.Unlock()
		})
	}
	if _, err := run(t, d, f, meshOf(t, "c: {image: "+busybox+"}"), nil); err != nil {
		t.Fatal(err)
	}
	if !lockFree {
		t.Fatal("the state lock was held during the health wait")
	}
	if len(claimed) != 1 || len(claimed[0].Containers) != 1 || claimed[0].Containers[0] != "m.c" {
		t.Errorf("claims during the wait = %+v, want one on m.c", claimed)
	}
	l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if live, err := coord.LiveClaims(d, l.Read); err != nil || len(live) != 0 {
		t.Errorf("claims after the apply = %+v, %v; want none", live, err)
	}
}
