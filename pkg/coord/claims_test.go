package coord

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

func lockState(t *testing.T, d *state.Dir) *state.Lock {
	t.Helper()
	l, err := d.Lock(context.Background(), "state", state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestClaimLifecycle: a claim is live while its lock is held, covers its
// containers only, and reads dead (not live) once its holder lets go
// without recording anything, as a killed apply does. A later claim keeps
// the dead one's record: only a heal drops it.
func TestClaimLifecycle(t *testing.T) {
	d, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	l := lockState(t, d)
	h, err := TakeClaim(l, Claim{Containers: []string{"m.a", "m.b"}, Creates: []string{"m.b"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckClaims(d, l.Read, []string{"m.c"}); err != nil {
		t.Errorf("m.c reads claimed: %v", err)
	}
	var ce *ClaimedError
	if err := CheckClaims(d, l.Read, []string{"m.c", "m.b"}); !errors.As(err, &ce) || ce.Claim.ID != h.ID {
		t.Errorf("m.b not claimed by %s: %v", h.ID, err)
	}
	l.Unlock()

	// WaitClaim returns once the claim ends.
	done := make(chan error, 1)
	go func() { done <- WaitClaim(context.Background(), d, h.Claim, time.Minute) }()
	select {
	case err := <-done:
		t.Fatalf("WaitClaim returned while the claim lives: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	h.Abandon() // killed: nothing recorded
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	l = lockState(t, d)
	defer l.Unlock()
	if live, err := LiveClaims(d, l.Read); err != nil || len(live) != 0 {
		t.Errorf("LiveClaims = %+v, %v; want the dead claim ignored", live, err)
	}
	h2, err := TakeClaim(l, Claim{Containers: []string{"m.c"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var doc ClaimsDoc
	if _, err := l.Read(ClaimsFile, &doc); err != nil || len(doc.Claims) != 2 || doc.Claims[0].ID != h.ID || doc.Claims[1].ID != h2.ID ||
		!slices.Equal(doc.Claims[0].Creates, []string{"m.b"}) {
		t.Errorf("claims.json = %+v, want the dead claim (creating m.b) and the new one", doc)
	}
	if err := h2.Release(l); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(ClaimsFile, &doc); err != nil || len(doc.Claims) != 1 || doc.Claims[0].ID != h.ID {
		t.Errorf("claims.json after Release = %+v, want the dead claim alone", doc)
	}
}
