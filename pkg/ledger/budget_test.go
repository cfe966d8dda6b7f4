package ledger

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meshctl/meshctl/internal/etcdtest"
)

// meshLedgers returns n ledgers on one prefix of the test cluster, each
// with a client of its own, as n hosts have.
func meshLedgers(t *testing.T, n int) []*Ledger {
	t.Helper()
	eps := etcdtest.Endpoints(t)
	prefix := etcdtest.Prefix(t.Name())
	var out []*Ledger
	for range n {
		l, err := OpenEtcd(EtcdConfig{Endpoints: strings.Split(eps, ","), Prefix: prefix, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		out = append(out, l)
	}
	return out
}

// TestSlotsNeverOverBudget: 6 hosts take and give back slots of one
// module under a budget of 2, many rounds at once. No more than 2 ever
// hold one, every host gets its turn, and a full budget names its
// holders.
func TestSlotsNeverOverBudget(t *testing.T) {
	ls := meshLedgers(t, 6)
	ctx := context.Background()
	var down, most atomic.Int32
	var wg sync.WaitGroup
	for h, l := range ls {
		wg.Go(func() {
			host := fmt.Sprintf("h%d", h)
			for round := range 5 {
				sl := Slot{Host: host, Module: "web", Token: fmt.Sprintf("%s-%d", host, round), PID: 1, TakenAt: time.Now()}
				for {
					b, err := l.TakeSlot(ctx, sl, 2)
					if err != nil {
						t.Error(err)
						return
					}
					if b.Taken {
						break
					}
					if len(b.Holders) < 2 || b.Limit != 2 {
						t.Errorf("%s refused with holders %v, limit %d", host, b.Holders, b.Limit)
						return
					}
					if err := l.WaitSlots(ctx, "web", b.Rev, time.Second); err != nil && ctx.Err() != nil {
						t.Error(err)
					}
				}
				n := down.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(5 * time.Millisecond)
				down.Add(-1)
				if ok, err := l.GiveBackSlot(ctx, "web", host, sl.Token); err != nil || !ok {
					t.Errorf("give back %s: %v, %v", host, ok, err)
				}
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > 2 {
		t.Errorf("%d hosts held a slot at once, budget 2", m)
	} else {
		t.Logf("at most %d hosts held a slot at once", m)
	}
}

// TestSlotSmallestBudgetHolds: a member that publishes a smaller budget
// lowers everyone's. A host's own slot is kept across a retake, and a
// give-back by another token leaves it.
func TestSlotSmallestBudgetHolds(t *testing.T) {
	ls := meshLedgers(t, 1)
	l, ctx := ls[0], context.Background()
	if err := l.PutMember(ctx, Member{Host: "a", Module: "web", MaxUnavailable: 1}); err != nil {
		t.Fatal(err)
	}
	if b, err := l.TakeSlot(ctx, Slot{Host: "a", Module: "web", Token: "t1"}, 3); err != nil || !b.Taken {
		t.Fatalf("a: %+v, %v", b, err)
	}
	b, err := l.TakeSlot(ctx, Slot{Host: "b", Module: "web", Token: "t2"}, 3)
	if err != nil || b.Taken || b.Limit != 1 || len(b.Holders) != 1 || b.Holders[0].Host != "a" {
		t.Fatalf("b under a's budget of 1: %+v, %v", b, err)
	}
	if b, err := l.TakeSlot(ctx, Slot{Host: "a", Module: "web", Token: "t3"}, 3); err != nil || !b.Taken {
		t.Fatalf("a again: %+v, %v", b, err)
	}
	if ok, err := l.GiveBackSlot(ctx, "web", "a", "t1"); err != nil || ok {
		t.Fatalf("a give-back by the old token removed it: %v, %v", ok, err)
	}
	st, err := l.Mesh(ctx, "web")
	if err != nil || len(st.Slots) != 1 || st.Slots[0].Token != "t3" || len(st.Members) != 1 {
		t.Fatalf("mesh %+v, %v", st, err)
	}
	gone, err := l.ForgetHost(ctx, "a")
	if err != nil || len(gone.Members) != 1 || len(gone.Slots) != 1 {
		t.Fatalf("forget a: %+v, %v", gone, err)
	}
	if b, err := l.TakeSlot(ctx, Slot{Host: "b", Module: "web", Token: "t2"}, 3); err != nil || !b.Taken {
		t.Fatalf("b once a is forgotten: %+v, %v", b, err)
	}
}

// TestSlotLostAnswer: a take whose answer was lost after its commit is
// tried again and finds the slot its own, once. A give-back whose answer
// was lost leaves no slot.
func TestSlotLostAnswer(t *testing.T) {
	l := meshLedgers(t, 1)[0]
	s := l.st.(*etcdStore)
	var lose atomic.Int32
	s.wrapKV = func(kv clientv3.KV) clientv3.KV { return lossyKV{kv, &lose} }
	ctx := context.Background()
	lose.Store(1)
	b, err := l.TakeSlot(ctx, Slot{Host: "a", Module: "web", Token: "t"}, 1)
	if err != nil || !b.Taken {
		t.Fatalf("a take whose answer was lost: %+v, %v; want it taken", b, err)
	}
	if lose.Load() >= 0 {
		t.Fatal("no answer was lost: the test proves nothing")
	}
	if b, err := l.TakeSlot(ctx, Slot{Host: "b", Module: "web", Token: "u"}, 1); err != nil || b.Taken || len(b.Holders) != 1 {
		t.Fatalf("b after a's lost answer: %+v, %v; want refused, a the one holder", b, err)
	}
	lose.Store(1)
	if _, err := l.GiveBackSlot(ctx, "web", "a", "t"); err != nil {
		t.Fatal(err)
	}
	if st, err := l.Mesh(ctx, "web"); err != nil || len(st.Slots) != 0 {
		t.Fatalf("after a give-back whose answer was lost: %+v, %v", st.Slots, err)
	}
}

// TestBudgetIgnoresMembersWithout: a member with no budget (0, a module
// in the mesh for its mesh: all step) limits nothing. The smallest
// positive budget holds, for a slot and for a gathering.
func TestBudgetIgnoresMembersWithout(t *testing.T) {
	without := []Member{{Host: "a"}, {Host: "b", MaxUnavailable: 0}}
	if got := limitOf(2, without); got != 2 {
		t.Errorf("limitOf(2, members without) = %d, want 2", got)
	}
	if got := budgetOf(0, without); got != 0 {
		t.Errorf("budgetOf(0, members without) = %d, want 0 (none)", got)
	}
	// The members without come after one with, as etcd may list them.
	with := append([]Member{{Host: "c", MaxUnavailable: 3}, {Host: "d", MaxUnavailable: 5}}, without...)
	if got := limitOf(4, with); got != 3 {
		t.Errorf("limitOf(4, …) = %d, want 3", got)
	}
	if got := budgetOf(0, with); got != 3 {
		t.Errorf("budgetOf(0, …) = %d, want 3", got)
	}

	// In etcd: two members without a budget, two hosts with one of 2.
	l, ctx := meshLedgers(t, 1)[0], context.Background()
	for _, h := range []string{"a", "b"} {
		if err := l.PutMember(ctx, Member{Host: h, Module: "web"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, h := range []string{"c", "d"} {
		if b, err := l.TakeSlot(ctx, Slot{Host: h, Module: "web", Token: fmt.Sprint("t", i)}, 2); err != nil || !b.Taken || b.Limit != 2 {
			t.Fatalf("%s under a budget of 2: %+v, %v", h, b, err)
		}
	}
}
