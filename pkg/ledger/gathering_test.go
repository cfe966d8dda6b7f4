package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meshctl/meshctl/internal/etcdproxy"
	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/fault"
)

const testGather = 2 * time.Second

// gatherMesh returns n ledgers, one per host h0…h(n-1), each a member of
// module store. The session lease is shortened for the test.
func gatherMesh(t *testing.T, n, budget int) []*Ledger {
	t.Helper()
	old := sessionTTL
	sessionTTL = 2 * time.Second
	t.Cleanup(func() { sessionTTL = old })
	ls := meshLedgers(t, n)
	for i := range n {
		m := Member{Host: fmt.Sprintf("h%d", i), Module: "store", MaxUnavailable: budget, Steps: map[string]string{"gc": "hash-a"}}
		if err := ls[0].PutMember(testCtx(t), m); err != nil {
			t.Fatal(err)
		}
	}
	return ls
}

// testCtx bounds a test's waits, so a broken wait fails the test.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func joinOf(i int) Join {
	return Join{Module: "store", Step: "gc", Host: fmt.Sprintf("h%d", i), Hash: "hash-a", PID: 100 + i, Gather: testGather, Timeout: 10 * time.Second}
}

func mustJoin(t *testing.T, l *Ledger, j Join) Gathered {
	t.Helper()
	g, err := l.JoinGathering(testCtx(t), j)
	if err != nil {
		t.Fatalf("join of %s: %v", j.Host, err)
	}
	t.Cleanup(g.Leave)
	return g
}

// gatherErrOf returns err as a *GatherError of kind, or fails the test.
func gatherErrOf(t *testing.T, what string, err error, kind fault.Kind) *GatherError {
	t.Helper()
	var ge *GatherError
	if !errors.As(err, &ge) || ge.Kind != kind {
		t.Fatalf("%s: %v; want a gathering refused as %s", what, err, kind)
	}
	return ge
}

func gatheringOf(t *testing.T, l *Ledger) Gathering {
	t.Helper()
	g, ok, err := l.Gathering(testCtx(t), "store")
	if err != nil || !ok {
		t.Fatalf("gathering of store: %v, %v", ok, err)
	}
	return g
}

// TestGatherFileLedgerRefused: a file ledger has no gathering.
func TestGatherFileLedgerRefused(t *testing.T) {
	l, _ := newTestLedger(t)
	if _, err := l.JoinGathering(testCtx(t), joinOf(0)); !errors.Is(err, ErrNotEtcd) {
		t.Fatalf("join on a file ledger: %v", err)
	}
	if _, _, err := l.Gathering(testCtx(t), "store"); !errors.Is(err, ErrNotEtcd) {
		t.Fatalf("gathering on a file ledger: %v", err)
	}
}

// TestGatherAllJoinStartEnd: three hosts join, the first runs the step.
// All hold, one start, and every member sees the end.
func TestGatherAllJoinStartEnd(t *testing.T) {
	ls := gatherMesh(t, 3, 0)
	ctx := testCtx(t)
	gs := []Gathered{mustJoin(t, ls[0], joinOf(0))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 1; i < 3; i++ {
		wg.Go(func() {
			g := mustJoin(t, ls[i], joinOf(i))
			mu.Lock()
			gs = append(gs, g)
			mu.Unlock()
		})
	}
	wg.Wait()
	var starts atomic.Int32
	code := 0
	for _, g := range gs {
		wg.Go(func() {
			all, err := g.AllJoined(ctx)
			if err != nil || all.State != GatherHolding || all.Runner != "h0" {
				t.Errorf("all joined: %+v, %v", all, err)
				return
			}
			if err := g.Held(ctx); err != nil {
				t.Error(err)
				return
			}
			var end StepEnd
			if g.Runner() {
				if err := g.Start(ctx); err != nil {
					t.Error(err)
					return
				}
				starts.Add(1)
				end = StepEnd{Result: "ok", Code: &code, At: time.Now(), By: "h0"}
				if err := g.End(ctx, end); err != nil {
					t.Error(err)
					return
				}
			} else {
				if err := g.WaitStart(ctx); err != nil {
					t.Error(err)
					return
				}
				if end, err = g.WaitEnd(ctx, time.Now().Add(10*time.Second)); err != nil || !end.OK() {
					t.Errorf("wait end: %+v, %v", end, err)
					return
				}
			}
			if err := g.Closed(ctx, true); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	runners := 0
	for _, g := range gs {
		if g.Runner() {
			runners++
		}
	}
	if runners != 1 || !gs[0].Runner() || starts.Load() != 1 {
		t.Fatalf("%d runners (h0 one: %v), %d starts; want h0 alone, once", runners, gs[0].Runner(), starts.Load())
	}
	g := gatheringOf(t, ls[1])
	if g.State != GatherEnded || g.End == nil || g.StartedAt.IsZero() || len(g.Members) != 3 {
		t.Fatalf("after the end: %+v", g)
	}
	for _, m := range g.Members {
		if !m.Joined || !m.Held || !m.Closed || !m.Back {
			t.Errorf("member %+v: want joined, held, closed and back", m)
		}
	}
	all, err := ls[2].Gatherings(ctx)
	if err != nil || len(all) != 1 || all[0].ID != g.ID {
		t.Fatalf("gatherings: %+v, %v", all, err)
	}
}

// TestGatherAbsentFailsAtDeadline: a member that never joins fails the
// gathering at the deadline, as etcd counts it. Every member's wait says
// so, naming it, and nobody held.
func TestGatherAbsentFailsAtDeadline(t *testing.T) {
	ls := gatherMesh(t, 3, 0)
	begin := time.Now()
	gs := []Gathered{mustJoin(t, ls[0], joinOf(0)), mustJoin(t, ls[1], joinOf(1))}
	var wg sync.WaitGroup
	for i, g := range gs {
		wg.Go(func() {
			_, err := g.AllJoined(testCtx(t))
			var ge *GatherError
			if !errors.As(err, &ge) || ge.Kind != fault.Failed || !slices.Equal(ge.Hosts, []string{"h2"}) || !strings.Contains(ge.Why, "h2") {
				t.Errorf("h%d all joined: %v; want failed naming h2", i, err)
			}
		})
	}
	wg.Wait()
	if d := time.Since(begin); d < testGather-500*time.Millisecond {
		t.Errorf("failed after %s, before the deadline of %s", d, testGather)
	}
	g := gatheringOf(t, ls[2])
	if g.State != GatherFailed || !strings.Contains(g.Failure, "h2") || !slices.Equal(g.Missing(), []string{"h2"}) {
		t.Fatalf("gathering %+v", g)
	}
	for _, m := range g.Members {
		if m.Held {
			t.Errorf("%s held", m.Host)
		}
	}
}

// TestGatherHashDiffers: a join with another step definition fails the
// gathering. The joiner, the members before it and a later joiner all
// get bad input, naming both hosts.
func TestGatherHashDiffers(t *testing.T) {
	ls := gatherMesh(t, 3, 0)
	ctx := testCtx(t)
	g0 := mustJoin(t, ls[0], joinOf(0))
	j1 := joinOf(1)
	j1.Hash = "hash-b"
	_, err := ls[1].JoinGathering(ctx, j1)
	ge := gatherErrOf(t, "h1's join with another hash", err, fault.BadInput)
	if !slices.Equal(ge.Hosts, []string{"h0", "h1"}) {
		t.Errorf("hosts named %v", ge.Hosts)
	}
	_, err = g0.AllJoined(ctx)
	gatherErrOf(t, "h0's wait", err, fault.BadInput)
	_, err = ls[2].JoinGathering(ctx, joinOf(2))
	gatherErrOf(t, "h2's join after the failure", err, fault.BadInput)
	if g := gatheringOf(t, ls[0]); g.State != GatherFailed {
		t.Fatalf("gathering %+v", g)
	}
}

// startAll joins n hosts, holds on each and starts the step.
func startAll(t *testing.T, ls []*Ledger) []Gathered {
	t.Helper()
	ctx := testCtx(t)
	var gs []Gathered
	for i := range ls {
		gs = append(gs, mustJoin(t, ls[i], joinOf(i)))
	}
	for _, g := range gs {
		if _, err := g.AllJoined(ctx); err != nil {
			t.Fatal(err)
		}
		if err := g.Held(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := gs[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	for _, g := range gs[1:] {
		if err := g.WaitStart(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return gs
}

// TestGatherJoinAfterStart: a join once the step started is busy, naming
// the gathering, and so is one after its end.
func TestGatherJoinAfterStart(t *testing.T) {
	ls := gatherMesh(t, 2, 0)
	gs := startAll(t, ls)
	id := gs[0].Gathering().ID
	late := meshLedgers(t, 1)[0]
	late.st.(*etcdStore).cfg.Prefix = ls[0].st.(*etcdStore).cfg.Prefix
	_, err := late.JoinGathering(testCtx(t), joinOf(1))
	if ge := gatherErrOf(t, "a join after the start", err, fault.Busy); ge.ID != id || !strings.Contains(err.Error(), id) || !strings.Contains(ge.Why, "after the step started") {
		t.Errorf("error %v does not name gathering %s and its start", err, id)
	}
	if err := gs[0].End(testCtx(t), StepEnd{Result: "ok", By: "h0"}); err != nil {
		t.Fatal(err)
	}
	_, err = late.JoinGathering(testCtx(t), joinOf(1))
	if ge := gatherErrOf(t, "a join after the end", err, fault.Busy); !strings.Contains(ge.Why, "after the step started") {
		t.Errorf("error %v does not say the step started", err)
	}
}

// TestGatherJoinAfterDeadline: a join after the deadline is busy, naming
// the gathering, and the gathering stays failed.
func TestGatherJoinAfterDeadline(t *testing.T) {
	ls := gatherMesh(t, 2, 0)
	g0 := mustJoin(t, ls[0], joinOf(0))
	_, err := g0.AllJoined(testCtx(t))
	gatherErrOf(t, "h0's wait for h1", err, fault.Failed)
	_, err = ls[1].JoinGathering(testCtx(t), joinOf(1))
	if ge := gatherErrOf(t, "h1's join after the deadline", err, fault.Busy); ge.ID != g0.Gathering().ID || !strings.Contains(ge.Why, "after the deadline") {
		t.Errorf("busy names gathering %q, want %q", ge.ID, g0.Gathering().ID)
	}
	if g := gatheringOf(t, ls[0]); g.State != GatherFailed || g.ID != g0.Gathering().ID {
		t.Fatalf("gathering %+v", g)
	}
}

// TestGatherLapseBeforeStart: a member whose session lapses before the
// start fails the gathering. The runner's start and the others' waits
// return the failure, naming it, and the step never starts.
func TestGatherLapseBeforeStart(t *testing.T) {
	ls := gatherMesh(t, 3, 0)
	ctx := testCtx(t)
	var gs []Gathered
	for i := range ls {
		gs = append(gs, mustJoin(t, ls[i], joinOf(i)))
	}
	for _, g := range gs {
		if _, err := g.AllJoined(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := gs[1].Held(ctx); err != nil {
		t.Fatal(err)
	}
	gs[2].Leave() // its renewals stop: the lease lapses, as when it dies
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = gs[0].Start(ctx) })
	wg.Go(func() { errs[1] = gs[1].WaitStart(ctx) })
	wg.Wait()
	for i, err := range errs {
		ge := gatherErrOf(t, fmt.Sprintf("h%d's start or wait", i), err, fault.Failed)
		if !slices.Equal(ge.Hosts, []string{"h2"}) || !strings.Contains(ge.Why, "lapsed") {
			t.Errorf("h%d: %v; want h2's lapse", i, err)
		}
	}
	if g := gatheringOf(t, ls[0]); g.State != GatherFailed || !g.StartedAt.IsZero() {
		t.Fatalf("gathering %+v", g)
	}
}

// TestGatherRunnerLapsesAfterStart: once started, a lapse never fails the
// gathering. A member's wait gives up at until, with the gathering still
// started. The runner's host then records the end. The end still reads
// once a new gathering replaced it.
func TestGatherRunnerLapsesAfterStart(t *testing.T) {
	ls := gatherMesh(t, 2, 0)
	ctx := testCtx(t)
	gs := startAll(t, ls)
	id := gs[0].Gathering().ID
	gs[0].Leave()
	until := time.Now().Add(sessionTTL + 2*time.Second)
	_, err := gs[1].WaitEnd(ctx, until)
	if !errors.Is(err, context.DeadlineExceeded) || time.Now().Before(until) || time.Since(until) > time.Second {
		t.Fatalf("wait end: %v at %s past until; want the deadline, at until", err, time.Since(until))
	}
	g := gatheringOf(t, ls[1])
	if g.State != GatherStarted || g.Members[0].Alive {
		t.Fatalf("after the runner's lapse: %+v; want started, h0 not alive", g)
	}
	code := 0
	end := StepEnd{Result: "ok", Code: &code, At: time.Now(), By: "h0"}
	if err := ls[0].RecordEnd(ctx, "store", id, end); err != nil {
		t.Fatal(err)
	}
	if err := ls[0].RecordEnd(ctx, "store", id, end); err != nil {
		t.Fatalf("the same end again: %v", err)
	}
	if err := ls[0].RecordEnd(ctx, "store", id, StepEnd{Result: "failed", By: "h0"}); exitCodeOf(err) != 4 {
		t.Fatalf("another end: %v; want a conflict", err)
	}
	if e, err := gs[1].WaitEnd(ctx, time.Now().Add(5*time.Second)); err != nil || !e.OK() {
		t.Fatalf("wait end after the record: %+v, %v", e, err)
	}
	other := joinOf(1)
	other.Step = "other"
	next := mustJoin(t, ls[1], other)
	if next.Gathering().ID == id {
		t.Fatal("the new gathering has the old one's id")
	}
	old, ok, err := ls[0].GatheringByID(ctx, "store", id)
	if err != nil || !ok || old.State != GatherEnded || old.End == nil || !old.End.OK() {
		t.Fatalf("gathering %s once replaced: %+v, %v, %v", id, old, ok, err)
	}
	if err := ls[0].RecordEnd(ctx, "store", id, end); err != nil {
		t.Fatalf("the same end again, once replaced: %v", err)
	}
}

// TestGatherStoppedBudget: a stopped hold of three hosts under a budget
// of one is refused at the gathering, naming both numbers. The gathering
// fails, so a later joiner is refused too.
func TestGatherStoppedBudget(t *testing.T) {
	ls := gatherMesh(t, 3, 1)
	j := joinOf(0)
	j.Stopped, j.MaxUnavailable = true, 1
	_, err := ls[0].JoinGathering(testCtx(t), j)
	gatherErrOf(t, "a stopped hold over budget", err, fault.BadInput)
	if !strings.Contains(err.Error(), "3 hosts") || !strings.Contains(err.Error(), "is 1") || !strings.Contains(err.Error(), "hold it changed") {
		t.Errorf("error %q does not name both numbers and the fix", err)
	}
	if g := gatheringOf(t, ls[1]); g.State != GatherFailed {
		t.Fatalf("gathering %+v", g)
	}
	j = joinOf(1)
	j.Stopped = true
	_, err = ls[1].JoinGathering(testCtx(t), j)
	gatherErrOf(t, "a later joiner", err, fault.BadInput)
}

// TestGatherLostAnswers: the answers of the joins, the start and the end
// are lost after their commit. Each is tried again, finds itself done,
// and the window runs as without a loss.
func TestGatherLostAnswers(t *testing.T) {
	ls := gatherMesh(t, 2, 0)
	ctx := testCtx(t)
	loses := make([]*atomic.Int32, len(ls))
	for i, l := range ls {
		loses[i] = &atomic.Int32{}
		l.st.(*etcdStore).wrapKV = func(kv clientv3.KV) clientv3.KV { return lossyKV{kv, loses[i]} }
	}
	lost := func(i int, what string) {
		t.Helper()
		if loses[i].Load() > 0 {
			t.Fatalf("%s: no answer was lost, the test proves nothing", what)
		}
	}
	loses[0].Store(1)
	g0 := mustJoin(t, ls[0], joinOf(0))
	lost(0, "first join")
	loses[1].Store(1)
	g1 := mustJoin(t, ls[1], joinOf(1))
	lost(1, "second join")
	for _, g := range []Gathered{g0, g1} {
		if all, err := g.AllJoined(ctx); err != nil || all.State != GatherHolding {
			t.Fatalf("all joined: %+v, %v", all, err)
		}
		if err := g.Held(ctx); err != nil {
			t.Fatal(err)
		}
	}
	loses[0].Store(1)
	if err := g0.Start(ctx); err != nil {
		t.Fatal(err)
	}
	lost(0, "start")
	if err := g1.WaitStart(ctx); err != nil {
		t.Fatal(err)
	}
	loses[0].Store(1)
	if err := g0.End(ctx, StepEnd{Result: "ok", By: "h0"}); err != nil {
		t.Fatal(err)
	}
	lost(0, "end")
	if e, err := g1.WaitEnd(ctx, time.Now().Add(5*time.Second)); err != nil || !e.OK() {
		t.Fatalf("wait end: %+v, %v", e, err)
	}
	if g := gatheringOf(t, ls[1]); g.State != GatherEnded || !g0.Runner() || g1.Runner() {
		t.Fatalf("gathering %+v", g)
	}
}

// TestGatherCancelledWait: a wait returns soon after its context ends,
// long before the deadline.
func TestGatherCancelledWait(t *testing.T) {
	ls := gatherMesh(t, 2, 0)
	j := joinOf(0)
	j.Gather = time.Minute
	g := mustJoin(t, ls[0], j)
	ctx, cancel := context.WithCancel(testCtx(t))
	time.AfterFunc(200*time.Millisecond, cancel)
	begin := time.Now()
	_, err := g.AllJoined(ctx)
	if !errors.Is(err, context.Canceled) || time.Since(begin) > 2*time.Second {
		t.Fatalf("a cancelled wait: %v after %s", err, time.Since(begin))
	}
	if err := g.Fail(testCtx(t), "interrupted"); err != nil {
		t.Fatal(err)
	}
	if st := gatheringOf(t, ls[1]); st.State != GatherFailed || !strings.Contains(st.Failure, "interrupted") {
		t.Fatalf("after Fail: %+v", st)
	}
}

// TestGatherOtherStepBusy: one mesh window per module. A join of another
// step while one is open is busy, naming the open step.
func TestGatherOtherStepBusy(t *testing.T) {
	ls := gatherMesh(t, 2, 0)
	g0 := mustJoin(t, ls[0], joinOf(0))
	j := joinOf(1)
	j.Step = "other"
	_, err := ls[1].JoinGathering(testCtx(t), j)
	if ge := gatherErrOf(t, "a join of another step", err, fault.Busy); ge.ID != g0.Gathering().ID || !strings.Contains(ge.Why, "step gc") {
		t.Fatalf("error %v does not name the open window", err)
	}
}

// TestGatherArchiveKeepsNewest: each over gathering is archived when the
// next replaces it. The newest gatheringsKept stay, the older go.
func TestGatherArchiveKeepsNewest(t *testing.T) {
	ls := gatherMesh(t, 1, 0)
	ctx := testCtx(t)
	var ids []string
	for i := range gatheringsKept + 3 {
		j := joinOf(0)
		j.Step = fmt.Sprintf("s%d", i%2) // another step replaces at once
		g := mustJoin(t, ls[0], j)
		ids = append(ids, g.Gathering().ID)
		if err := g.Fail(ctx, "done"); err != nil {
			t.Fatal(err)
		}
	}
	s := ls[0].st.(*etcdStore)
	resp, err := s.cli.Get(ctx, s.meshPrefix("gatherings-done", "store"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil || resp.Count != gatheringsKept {
		t.Fatalf("%v archived, %v; want %d", resp.Count, err, gatheringsKept)
	}
	for i, id := range ids {
		_, ok, err := ls[0].GatheringByID(ctx, "store", id)
		if want := i >= len(ids)-1-gatheringsKept; err != nil || ok != want {
			t.Errorf("gathering %d (%s): found %v, %v; want %v", i, id, ok, err, want)
		}
	}
}

// TestGatherJoinAfterSessionLapsed: etcd is out of a joiner's reach from
// its first read of the gathering until its session lease lapsed (through
// a proxy that refuses every call meanwhile). The join then fails at once,
// saying so (exit 1, nothing held). It used to try again, each try refused
// for the dead lease, until the ledger's timeout, and then said etcd was
// unreachable (found by the harness's TestMeshEtcdAnswersLost).
func TestGatherJoinAfterSessionLapsed(t *testing.T) {
	old := sessionTTL
	sessionTTL = 2 * time.Second
	t.Cleanup(func() { sessionTTL = old })
	eps := strings.Split(etcdtest.Endpoints(t), ",")
	p, err := etcdproxy.Start(eps[0])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	l, err := OpenEtcd(EtcdConfig{Endpoints: []string{p.Addr()}, Prefix: etcdtest.Prefix(t.Name()), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.PutMember(testCtx(t), Member{Host: "h0", Module: "store", Steps: map[string]string{"gc": "hash-a"}}); err != nil {
		t.Fatal(err)
	}
	// The join's calls: the session's grant, its keep-alive, then the
	// first read. From that read on, nothing reaches etcd for 5 s.
	p.SetRules(etcdproxy.Rule{Method: "KV/Txn", Nth: 1, Action: etcdproxy.Refuse, For: 5 * time.Second},
		etcdproxy.Rule{Method: "Lease/LeaseKeepAlive", Nth: 2, Action: etcdproxy.Refuse, For: 5 * time.Second})
	g, err := l.JoinGathering(testCtx(t), joinOf(0))
	if err == nil {
		g.Leave()
		t.Fatalf("the join of a lapsed session succeeded (proxy: %v)", p.Fired())
	}
	ge := gatherErrOf(t, "join after the session lapsed", err, fault.Failed)
	if !strings.Contains(ge.Why, "session lapsed before it joined") || !slices.Equal(ge.Hosts, []string{"h0"}) {
		t.Errorf("join: %v; want it to name h0's lapsed session", err)
	}
	if len(p.Fired()) == 0 {
		t.Fatal("the proxy refused nothing: the test proves nothing")
	}
}
