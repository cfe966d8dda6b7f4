package coord

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestMeshHoldsOnEtcd runs the runner's death mid-step against the test
// etcd cluster. Host host-b runs the step of module m's mesh window, and
// host-a holds for it. Both windows die after the start. host-a's hold
// stays orphaned, naming host-b. host-b's apply records the end from its
// exited step container and releases its hold. Then host-a's is stale.
func TestMeshHoldsOnEtcd(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	prefix := etcdtest.Prefix(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func() *ledger.Ledger {
		l, err := ledger.OpenEtcd(ledger.EtcdConfig{Endpoints: strings.Split(eps, ","), Prefix: prefix, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	la, lb := open(), open()
	for _, h := range []string{"host-a", "host-b"} {
		if err := la.PutMember(ctx, ledger.Member{Host: h, Module: "m", Steps: map[string]string{"s": "hash"}}); err != nil {
			t.Fatal(err)
		}
	}
	join := func(l *ledger.Ledger, host string) ledger.Gathered {
		g, err := l.JoinGathering(ctx, ledger.Join{Module: "m", Step: "s", Host: host, Hash: "hash", PID: 1, Gather: 5 * time.Second, Timeout: time.Minute})
		if err != nil {
			t.Fatalf("join of %s: %v", host, err)
		}
		t.Cleanup(g.Leave)
		return g
	}
	gb := join(lb, "host-b")
	ga := join(la, "host-a")
	for _, g := range []ledger.Gathered{ga, gb} {
		if _, err := g.AllJoined(ctx); err != nil {
			t.Fatal(err)
		}
		if err := g.Held(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := gb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	id := gb.Gathering().ID

	// Both windows died mid-step: their holds stay in their state dirs.
	da, engA, scopeA := meshSetup(t, false, 0)
	db, engB, scopeB := meshSetup(t, true, 137)
	for _, d := range []*state.Dir{da, db} {
		setGathering(t, d, id)
	}
	st, v, n := applyLike(t, da, engA, scopeA, Mesh{Gather: la, Host: "host-a"})
	if st != Orphaned || n != 0 || !strings.Contains(v.Describe(), "runs on host host-b") {
		t.Fatalf("host-a: %s, %d released, %q; want orphaned, naming host-b", st, n, v.Describe())
	}
	st, _, n = applyLike(t, db, engB, scopeB, Mesh{Gather: lb, Host: "host-b"})
	if st != Stale || n != 1 {
		t.Fatalf("host-b: %s, %d released; want its end recorded and its hold released", st, n)
	}
	g, ok, err := la.GatheringByID(ctx, "m", id)
	if err != nil || !ok || g.End == nil || g.End.Result != "failed" || g.End.Code == nil || *g.End.Code != 137 || g.End.By != "host-b" {
		t.Fatalf("gathering %+v, %v, %v; want its end failed, exit 137, by host-b", g, ok, err)
	}
	if st, _, n = applyLike(t, da, engA, scopeA, Mesh{Gather: la, Host: "host-a"}); st != Stale || n != 1 {
		t.Errorf("host-a after the end: %s, %d released; want its hold released", st, n)
	}
}

// setGathering sets the gathering of the one hold in d's holds file.
func setGathering(t *testing.T, d *state.Dir, id string) {
	t.Helper()
	l, err := d.Lock(context.Background(), StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	var hd HoldsDoc
	if _, err := l.Read(HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	hd.Holds[0].Gathering = id
	if err := l.Write(HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
}
