package coord

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// Claim is one apply's claim on the containers it changes.
type Claim struct {
	ID         string   `json:"id"`
	PID        int      `json:"pid"`
	Containers []string `json:"containers"`
	// Creates are the containers of Containers that did not exist. The claim
	// creates them. One there after its claim died was never seen healthy.
	Creates []string `json:"creates,omitempty"`
	// Defers are containers a live window holds that the apply changes only
	// in its record (deferred). The window's close waits for the claim to
	// end, then carries the change out.
	Defers []string `json:"defers,omitempty"`
	// Ran are the containers the claim recreates that ran when it was taken,
	// each with the id of the one that ran. The claim may die with that same
	// container under the name and nothing aside. A stop or a start of it may
	// then still be in flight, which the listing reads as the opposite. The
	// heal stops it, waiting for either, and starts it.
	Ran map[string]string `json:"ran,omitempty"`
	// StartsFirst are the containers of Ran the claim recreates start-first.
	// Until its new one passes the gate, the old one is never stopped. So
	// the heal never stops it either.
	StartsFirst []string  `json:"starts_first,omitempty"`
	Since       time.Time `json:"since"`
}

// ClaimedError is another apply's live claim, seen under the state lock.
// An apply about to plan or a window about to record its hold sees it.
// The caller unlocks, waits for the claim to end (WaitClaim), and tries
// again.
type ClaimedError struct{ Claim Claim }

func (e *ClaimedError) Error() string {
	return fmt.Sprintf("apply (pid %d) is changing %s", e.Claim.PID, strings.Join(e.Claim.Containers, ", "))
}

// ClaimsDoc is the claims.json document.
type ClaimsDoc struct {
	state.Header
	Claims []Claim `json:"claims"`
}

// HeldClaim is a claim this process holds.
type HeldClaim struct {
	Claim
	lock *state.Lock

	mu   sync.Mutex
	kept []string
}

// Keep marks name, one of the claim's containers, as left for a heal. Its
// change failed half way (lifecycle.NotPutBackError). Release then keeps
// the claim's part on it recorded, dead once the OS lock goes. The next
// apply or window open heals it as it heals a dead apply's claim.
func (h *HeldClaim) Keep(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !slices.Contains(h.kept, name) {
		h.kept = append(h.kept, name)
	}
}

// LiveClaims returns the claims recorded in the state directory whose process
// still holds their lock. read reads under the caller's state lock.
func LiveClaims(d *state.Dir, read func(string, state.Document) (bool, error)) ([]Claim, error) {
	var doc ClaimsDoc
	if _, err := read(ClaimsFile, &doc); err != nil {
		return nil, err
	}
	return liveClaimsOf(d, doc.Claims)
}

// liveClaimsOf returns the claims of cs whose holder still runs, its lock
// held. It serves a caller that has read claims.json already.
func liveClaimsOf(d *state.Dir, cs []Claim) ([]Claim, error) {
	var out []Claim
	for _, c := range cs {
		alive, err := d.Held(ClaimLock(c.ID))
		if err != nil {
			return nil, err
		}
		if alive {
			out = append(out, c)
		}
	}
	return out, nil
}

// CheckClaims returns a *ClaimedError for a live claim, nil when there is
// none. With names, only a claim on one of them counts. An apply checks
// every claim before it plans, and a window its held names before it
// records its hold.
func CheckClaims(d *state.Dir, read func(string, state.Document) (bool, error), names []string) error {
	live, err := LiveClaims(d, read)
	if err != nil {
		return err
	}
	for _, c := range live {
		if names == nil || slices.ContainsFunc(names, func(n string) bool { return slices.Contains(c.Containers, n) }) {
			return &ClaimedError{Claim: c}
		}
	}
	return nil
}

// TakeClaim records c under the state lock lock. The caller fills in
// Containers, Creates and Defers, and TakeClaim the rest. It takes the
// claim's OS lock, then records the claim. The records of dead claims
// stay. The caller healed what it could of them first, and the rest waits
// to be healed.
func TakeClaim(lock *state.Lock, c Claim, now time.Time) (*HeldClaim, error) {
	d := lock.Dir()
	id := fmt.Sprintf("%d-%d", now.UnixNano(), os.Getpid())
	l, ok, err := d.TryLock(ClaimLock(id))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("claim %s: its lock is taken", id)
	}
	var doc ClaimsDoc
	if _, err := lock.Read(ClaimsFile, &doc); err != nil {
		l.RemoveLockFile()
		l.Unlock()
		return nil, err
	}
	c.ID, c.PID, c.Since = id, os.Getpid(), now.UTC()
	h := &HeldClaim{Claim: c, lock: l}
	doc.Claims = append(doc.Claims, h.Claim)
	if err := lock.Write(ClaimsFile, &doc); err != nil {
		l.RemoveLockFile()
		l.Unlock()
		return nil, err
	}
	return h, nil
}

// Release drops the claim under the state lock lock, then lets go of its
// OS lock. Whoever waits for it then sees the state that apply recorded.
func (h *HeldClaim) Release(lock *state.Lock) error {
	var doc ClaimsDoc
	_, err := lock.Read(ClaimsFile, &doc)
	if err == nil {
		doc.Claims = slices.DeleteFunc(doc.Claims, func(c Claim) bool { return c.ID == h.ID })
		if left, ok := h.left(); ok {
			doc.Claims = append(doc.Claims, left)
		}
		err = lock.Write(ClaimsFile, &doc)
	}
	h.lock.RemoveLockFile()
	h.lock.Unlock()
	return err
}

// Abandon lets go of the claim's OS lock without touching claims.json,
// with no state lock to hand. The claim reads dead from now on.
func (h *HeldClaim) Abandon() {
	h.lock.RemoveLockFile()
	h.lock.Unlock()
}

// WaitClaim waits, at most timeout, until claim c ends. It ends when its
// process lets go of its lock, or dies.
func WaitClaim(ctx context.Context, d *state.Dir, c Claim, timeout time.Duration) error {
	l, err := d.Lock(ctx, ClaimLock(c.ID), state.LockOptions{Timeout: timeout,
		What: "the claim of apply (pid " + fmt.Sprint(c.PID) + ") on " + strings.Join(c.Containers, ", ")})
	if err != nil {
		return err
	}
	// Taken only to learn that the claim ended. Let go at once, with the
	// file, which the claimant removed or left when it died.
	l.RemoveLockFile()
	l.Unlock()
	return nil
}

// Deferring returns a live claim that defers a change to any of names, if
// there is one. A window's close waits for it before it drops its hold.
func Deferring(d *state.Dir, read func(string, state.Document) (bool, error), names []string) (Claim, bool, error) {
	live, err := LiveClaims(d, read)
	if err != nil {
		return Claim{}, false, err
	}
	for _, c := range live {
		if slices.ContainsFunc(names, func(n string) bool { return slices.Contains(c.Defers, n) }) {
			return c, true, nil
		}
	}
	return Claim{}, false, nil
}

// left is the claim's part on the containers Keep marked, if any.
func (h *HeldClaim) left() (Claim, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.Claim.Part(func(name string) bool { return slices.Contains(h.kept, name) })
}

// Part is c on those of its containers that in says, with what it records
// of them. It says false when there is none.
func (c Claim) Part(in func(name string) bool) (Claim, bool) {
	p := Claim{ID: c.ID, PID: c.PID, Since: c.Since}
	for _, n := range c.Containers {
		if !in(n) {
			continue
		}
		p.Containers = append(p.Containers, n)
		if slices.Contains(c.Creates, n) {
			p.Creates = append(p.Creates, n)
		}
		if id, ok := c.Ran[n]; ok {
			if p.Ran == nil {
				p.Ran = map[string]string{}
			}
			p.Ran[n] = id
		}
		if slices.Contains(c.StartsFirst, n) {
			p.StartsFirst = append(p.StartsFirst, n)
		}
	}
	return p, len(p.Containers) > 0
}
