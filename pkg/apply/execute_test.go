package apply

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
)

// TestHealthWaitHoldsNoSlot: a health wait is watching, not engine work: at
// --parallel 1, the second and third containers are created and started
// while the first one's health wait is still under way. The fake holds
// every health wait until all three have started; a wait that kept its
// slot would hold it for ever (it gives up after 10 s, and fails).
func TestHealthWaitHoldsNoSlot(t *testing.T) {
	const n = 3
	f := enginetest.NewFake(busybox)
	var mu sync.Mutex
	started := map[string]bool{}
	all := make(chan struct{})
	var stuck []string
	f.Hook = func(op, target string) {
		mu.Lock()
		switch {
		case op == enginetest.OpStart:
			started[target] = true
			if len(started) == n {
				close(all)
			}
			mu.Unlock()
		case op == enginetest.OpInspect && started[target]:
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(10 * time.Second):
				mu.Lock()
				stuck = append(stuck, target)
				mu.Unlock()
			}
		default:
			mu.Unlock()
		}
	}
	var cs []string
	for i := range n {
		cs = append(cs, fmt.Sprintf("c%d: {image: %s}", i, busybox))
	}
	rep, err := run(t, stateDir(t), f, meshOf(t, cs...), func(o *Options) { o.Parallel = 1 })
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range actions(rep) {
		if a != Create {
			t.Errorf("%s: %s, want create", name, a)
		}
	}
	if len(stuck) > 0 {
		t.Errorf("the health waits of %v waited for starts that came only after them: a wait held the slot", stuck)
	}
}
