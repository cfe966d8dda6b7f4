package ledger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meshctl/meshctl/internal/etcdtest"
)

// testEtcd returns a ledger in the test etcd cluster (scripts/etcd.sh; its
// endpoints in MESHCTL_TEST_ETCD), under a prefix of its own. Without a
// cluster the test skips, except under CI=true, where that is a failure.
func testEtcd(t testing.TB) *Ledger {
	t.Helper()
	eps := etcdtest.Endpoints(t)
	l, err := OpenEtcd(EtcdConfig{Endpoints: strings.Split(eps, ","), Prefix: etcdtest.Prefix(t.Name()), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// eachStore runs f against a ledger of each store: the files, and etcd.
func eachStore(t *testing.T, f func(t *testing.T, l *Ledger)) {
	t.Run("file", func(t *testing.T) {
		l, _ := newTestLedger(t)
		f(t, l)
	})
	t.Run("etcd", func(t *testing.T) {
		f(t, testEtcd(t))
	})
}

// TestStoresFollowOneRule replays the build-order incident and the record
// rules on both stores: the rule is the Ledger's, not a store's.
func TestStoresFollowOneRule(t *testing.T) {
	eachStore(t, func(t *testing.T, l *Ledger) {
		plan1 := request(t, l, "runtime", "api")
		plan2 := request(t, l, "runtime", "api")
		a, b := plan1.Builds[0].ID, plan2.Builds[0].ID
		if !(plan1.ID[2:] < a[2:] && a < plan1.Builds[1].ID && plan1.Builds[1].ID[2:] < plan2.ID[2:] && plan2.ID[2:] < b[2:]) {
			t.Fatalf("ids out of request order: %+v %+v", plan1, plan2)
		}
		if got := rec(t, l, b, digestImage("reg/runtime", 2)); got.Outcome != OutcomeCurrent {
			t.Fatalf("B recorded %s, want current", got.Outcome)
		}
		if got := rec(t, l, a, digestImage("reg/runtime", 1)); got.Outcome != OutcomeSuperseded || got.Current == nil || got.Current.ID != b {
			t.Fatalf("A (requested first, finished last) recorded %s, current %+v; want superseded, B current", got.Outcome, got.Current)
		}
		cur, err := l.Current("runtime")
		if err != nil || cur.ID != b {
			t.Fatalf("current runtime %+v, %v; want B", cur, err)
		}
		rec(t, l, plan2.Builds[1].ID, digestImage("reg/api", 2))
		checkSettled(t, l, plan2.ID, true)
		checkSettled(t, l, plan1.ID, false)

		// Again: the same result is idempotent with the first outcome;
		// another is a conflict (exit 4) that changes nothing.
		if got := rec(t, l, a, digestImage("reg/runtime", 1)); !got.Again || got.Outcome != OutcomeSuperseded {
			t.Errorf("record A again: %+v, want again, superseded", got)
		}
		if _, err := l.Record(ctx, b, mustImage(t, digestImage("reg/runtime", 3)), ""); exitCodeOf(err) != 4 {
			t.Errorf("record B with another image: %v, want exit 4", err)
		}
		if cur, _ := l.Current("runtime"); cur.Image != digestImage("reg/runtime", 2) {
			t.Errorf("a conflict changed current to %s", cur.Image)
		}
		for _, id := range []string{"b-01JNQX6Z2V0000000000000000", "b-7ZZZZZZZZZZZZZZZZZZZZZZZZZ", plan1.ID} {
			if _, err := l.Record(ctx, id, mustImage(t, "reg/app:1"), ""); exitCodeOf(err) != 2 {
				t.Errorf("record %s: %v, want exit 2", id, err)
			}
		}
		if _, err := l.Request(ctx, []string{"web"}, "p-01JNQX6Z2V0000000000000000"); exitCodeOf(err) != 2 {
			t.Errorf("request into an unknown plan: %v, want exit 2", err)
		}
		more, err := l.Request(ctx, []string{"cache"}, plan1.ID)
		if err != nil || more.ID != plan1.ID {
			t.Fatalf("request --plan: %+v, %v", more, err)
		}
		rec(t, l, plan1.Builds[1].ID, "")
		checkSettled(t, l, plan1.ID, false) // cache still pending
		rec(t, l, more.Builds[0].ID, "reg/cache:1")
		checkSettled(t, l, plan1.ID, true)

		all, err := l.List(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, b := range all {
			got = append(got, b.Module+"="+string(b.State))
		}
		want := "runtime=superseded api=failed runtime=current api=current cache=current"
		if strings.Join(got, " ") != want {
			t.Errorf("list: %s\nwant:   %s", strings.Join(got, " "), want)
		}
		cs, err := l.Currents(context.Background())
		if err != nil || len(cs) != 3 {
			t.Errorf("currents: %+v, %v", cs, err)
		}
	})
}

// BenchmarkRecordStore is one build record (its request is not timed) on
// each store: the files, and a 3-member etcd on 127.0.0.1 (skipped without
// one).
func BenchmarkRecordStore(b *testing.B) {
	for _, store := range []string{"file", "etcd"} {
		b.Run(store, func(b *testing.B) {
			var l *Ledger
			if store == "file" {
				l, _ = newTestLedger(b)
			} else {
				l = testEtcd(b)
			}
			img := mustImage(b, digestImage("reg/app", 1))
			for b.Loop() {
				b.StopTimer()
				id := request(b, l, "app").Builds[0].ID
				b.StartTimer()
				if _, err := l.Record(ctx, id, img, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// lossyKV commits transactions but, while lose is positive, loses the
// answer of a successful one: the caller sees an error, as when a leader
// dies after committing and before answering.
type lossyKV struct {
	clientv3.KV
	lose *atomic.Int32
}

func (k lossyKV) Txn(ctx context.Context) clientv3.Txn { return lossyTxn{k.KV.Txn(ctx), k.lose} }

type lossyTxn struct {
	clientv3.Txn
	lose *atomic.Int32
}

func (t lossyTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { return lossyTxn{t.Txn.If(cs...), t.lose} }
func (t lossyTxn) Then(ops ...clientv3.Op) clientv3.Txn { return lossyTxn{t.Txn.Then(ops...), t.lose} }
func (t lossyTxn) Else(ops ...clientv3.Op) clientv3.Txn { return lossyTxn{t.Txn.Else(ops...), t.lose} }

func (t lossyTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if err == nil && resp.Succeeded && t.lose.Add(-1) >= 0 {
		return nil, errors.New("etcdserver: request timed out (answer lost after commit)")
	}
	return resp, err
}

// TestEtcdLostAnswerNotRepeated loses the answer of committed requests and
// records: run again with the same idempotency key, each is done once and
// returns its first answer: one id per request, the first outcome.
func TestEtcdLostAnswerNotRepeated(t *testing.T) {
	l := testEtcd(t)
	s := l.st.(*etcdStore)
	var lose atomic.Int32
	s.wrapKV = func(kv clientv3.KV) clientv3.KV { return lossyKV{kv, &lose} }

	lose.Store(1)
	p, err := l.Request(ctx, []string{"app"}, "")
	if err != nil {
		t.Fatal(err)
	}
	all, err := l.List(ctx, "app")
	if err != nil || len(all) != 1 || all[0].ID != p.Builds[0].ID {
		t.Fatalf("after a request whose answer was lost once: %+v, %v; want exactly its one build %s", all, err, p.Builds[0].ID)
	}
	older := request(t, l, "app").Builds[0].ID
	newer := request(t, l, "app").Builds[0].ID
	rec(t, l, newer, digestImage("reg/app", 2))

	lose.Store(1)
	r, err := l.Record(ctx, older, mustImage(t, digestImage("reg/app", 1)), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Outcome != OutcomeSuperseded || r.Again {
		t.Errorf("record whose answer was lost: %+v, want superseded, the first answer (not again)", r)
	}
	if lose.Load() > 0 {
		t.Fatal("no answer was lost: the test proves nothing")
	}
}

// TestEtcdRetention records many more builds than Retain on etcd: the
// newest Retain (and the current one) are listed in full, older ones are
// pruned to compact records that still judge a record again (idempotent or
// a conflict) and a late record of an old pending build (superseded).
func TestEtcdRetention(t *testing.T) {
	l := testEtcd(t)
	l.Retain = 3
	late := request(t, l, "app").Builds[0].ID
	var ids []string
	for i := range 12 {
		id := request(t, l, "app").Builds[0].ID
		ids = append(ids, id)
		img := digestImage("reg/app", i)
		if i == 5 {
			img = "" // failed: the current build stays ids[4]… until ids[6]
		}
		rec(t, l, id, img)
	}
	all, err := l.List(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	var full []string
	for _, b := range all {
		if b.State != StatePending {
			full = append(full, b.ID)
		}
	}
	if want := ids[len(ids)-3:]; !slices.Equal(full, want) {
		t.Errorf("kept in full: %v, want the newest 3 %v", full, want)
	}
	if r := rec(t, l, ids[0], digestImage("reg/app", 0)); !r.Again || r.Outcome != OutcomeCurrent || !r.Build.Pruned {
		t.Errorf("pruned build recorded again: %+v, want again, current, pruned", r)
	}
	if _, err := l.Record(ctx, ids[1], mustImage(t, digestImage("reg/app", 99)), ""); exitCodeOf(err) != 4 {
		t.Errorf("pruned build with another image: %v, want exit 4", err)
	}
	if r := rec(t, l, late, digestImage("reg/app", 100)); r.Outcome != OutcomeSuperseded {
		t.Errorf("the oldest request recorded last: %s, want superseded", r.Outcome)
	}
	if cur, err := l.Current("app"); err != nil || cur.ID != ids[11] {
		t.Errorf("current %+v, %v; want %s", cur, err, ids[11])
	}
}

// TestRequestManyModules requests builds of 130 modules at once, more than
// one etcd transaction may write (--max-txn-ops, 128 by default): both
// stores accept it with the same outputs, one plan with every build, ids in
// the order of the modules.
func TestRequestManyModules(t *testing.T) {
	var modules []string
	for i := range 130 {
		modules = append(modules, fmt.Sprintf("m%03d", i))
	}
	eachStore(t, func(t *testing.T, l *Ledger) {
		p := request(t, l, modules...)
		if len(p.Builds) != len(modules) {
			t.Fatalf("%d builds, want %d", len(p.Builds), len(modules))
		}
		for i, b := range p.Builds {
			if b.Module != modules[i] || b.Plan != p.ID || i > 0 && b.ID <= p.Builds[i-1].ID {
				t.Fatalf("build %d: %+v; want module %s of plan %s, after %s", i, b, modules[i], p.ID, p.Builds[max(i-1, 0)].ID)
			}
		}
		got, err := l.Plan(ctx, p.ID)
		if err != nil || len(got.Builds) != len(modules) || got.Settled {
			t.Fatalf("plan %s: %d builds, settled %v, %v; want %d pending", p.ID, len(got.Builds), got.Settled, err, len(modules))
		}
		all, err := l.List(ctx, "")
		if err != nil || len(all) != len(modules) {
			t.Fatalf("list: %d builds, %v; want %d", len(all), err, len(modules))
		}
	})
}

// TestEtcdRefusalsFailAtOnce: an error the cluster will give again (here a
// transaction of more operations than --max-txn-ops) is reported at once,
// saying what it is, not retried for the whole budget as a cluster that
// did not answer.
func TestEtcdRefusalsFailAtOnce(t *testing.T) {
	l := testEtcd(t)
	s := l.st.(*etcdStore)
	// Retried, it would end as "did not answer" once the budget is spent.
	err := s.update(ctx, func(tx txn) error {
		t := tx.(*etcdTx)
		for i := range 200 {
			t.put(t.s.key("x", strconv.Itoa(i)), i)
		}
		return nil
	})
	var r *RefusedError
	if !errors.As(err, &r) || !strings.Contains(err.Error(), "too many operations in txn request") || strings.Contains(err.Error(), "did not answer") {
		t.Errorf("a transaction of 200 writes: %v; want refused, too many operations", err)
	}
}

// hookKV runs between, once, after a transaction commits and before its
// answer is returned: another host's operation in that window.
type hookKV struct {
	clientv3.KV
	between *func()
}

func (k hookKV) Txn(ctx context.Context) clientv3.Txn { return hookTxn{k.KV.Txn(ctx), k.between} }

type hookTxn struct {
	clientv3.Txn
	between *func()
}

func (t hookTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { return hookTxn{t.Txn.If(cs...), t.between} }
func (t hookTxn) Then(ops ...clientv3.Op) clientv3.Txn { return hookTxn{t.Txn.Then(ops...), t.between} }
func (t hookTxn) Else(ops ...clientv3.Op) clientv3.Txn { return hookTxn{t.Txn.Else(ops...), t.between} }

func (t hookTxn) Commit() (*clientv3.TxnResponse, error) {
	resp, err := t.Txn.Commit()
	if f := *t.between; err == nil && resp.Succeeded && f != nil {
		*t.between = nil
		f()
		return nil, errors.New("etcdserver: request timed out (answer lost after commit)")
	}
	return resp, err
}

// TestEtcdAnswersKeptByTheCluster: an answer lives under a lease of a day
// that the cluster counts, not under a name a host's clock dates, so that
// another host whose clock is ahead (here: committing between the lost
// answer and its retry) can never forget it early; the retry finds it and
// the request is made once.
func TestEtcdAnswersKeptByTheCluster(t *testing.T) {
	b := testEtcd(t)
	s := b.st.(*etcdStore)
	a := etcdClient(t, s.cfg)
	a.Now = skewedClock(25 * time.Hour)
	between := func() { request(t, a, "api") }
	s.wrapKV = func(kv clientv3.KV) clientv3.KV { return hookKV{kv, &between} }
	if _, err := b.Request(ctx, []string{"web"}, ""); err != nil {
		t.Fatal(err)
	}
	if between != nil {
		t.Fatal("no answer was lost: the test proves nothing")
	}
	if all, err := b.List(ctx, "web"); err != nil || len(all) != 1 {
		t.Errorf("web after one request whose answer was lost: %d builds, %v; want 1", len(all), err)
	}
	cli, _ := s.client()
	resp, err := cli.Get(ctx, s.key("answer")+"/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("answers: %v, %v; want 2", resp, err)
	}
	for _, kv := range resp.Kvs {
		ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		if err != nil || ttl.GrantedTTL != int64(answerTTL/time.Second) || ttl.TTL <= 0 {
			t.Errorf("answer %s: lease %+v, %v; want one of %s, alive", kv.Key, ttl, err, answerTTL)
		}
	}
}

// TestStoresTakeTheLedgersEntropy: on each store, the random low bits of
// the ids a request issues come from Ledger.Entropy (the etcd store read
// crypto/rand whatever the Ledger said).
func TestStoresTakeTheLedgersEntropy(t *testing.T) {
	eachStore(t, func(t *testing.T, l *Ledger) {
		r := &countingReader{r: defaultEntropy}
		l.Entropy = r
		if _, err := l.Request(context.Background(), []string{"app"}, ""); err != nil {
			t.Fatal(err)
		}
		if r.n.Load() == 0 {
			t.Error("the request issued its ids without reading Ledger.Entropy")
		}
	})
}

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
