package etcdproxy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/ledger"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// client is an etcd client of addr that does not retry on its own.
func client(t *testing.T, addr string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestLoseAnswer: the second Txn through the proxy reaches etcd and is
// carried out, but its answer is lost: the client gets an error, and etcd
// has the key. Calls before and after it pass. A refused Txn never
// reaches etcd.
func TestLoseAnswer(t *testing.T) {
	eps := strings.Split(etcdtest.Endpoints(t), ",")
	prefix := etcdtest.Prefix(t.Name())
	p, err := Start(eps[0], Rule{Method: "KV/Txn", Nth: 2, Action: LoseAnswer}, Rule{Method: "KV/Txn", Nth: 4, Action: Refuse})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	via, direct := client(t, p.Addr()), client(t, eps[0])
	txn := func(key string) error {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		_, err := via.Txn(ctx).Then(clientv3.OpPut(prefix+key, "v")).Commit()
		return err
	}
	has := func(key string) bool {
		resp, err := direct.Get(t.Context(), prefix+key)
		if err != nil {
			t.Fatal(err)
		}
		return len(resp.Kvs) == 1
	}
	if err := txn("/1"); err != nil {
		t.Fatalf("first txn: %v", err)
	}
	if err := txn("/2"); err == nil {
		t.Fatal("second txn: its answer came back, want it lost")
	}
	if !has("/2") {
		t.Error("the lost answer's txn was not carried out")
	}
	if err := txn("/3"); err != nil {
		t.Fatalf("third txn, after the cut: %v", err)
	}
	if err := txn("/4"); err == nil {
		t.Fatal("fourth txn: answered, want it refused")
	}
	if has("/4") {
		t.Error("the refused txn reached etcd")
	}
	if err := txn("/5"); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("fifth txn: %v", err)
	}
	want := []string{"lost /etcdserverpb.KV/Txn #2", "refused /etcdserverpb.KV/Txn #4"}
	if got := p.Fired(); !slices.Equal(got, want) {
		t.Errorf("fired %q, want %q", got, want)
	}
	if n := len(slices.DeleteFunc(p.Calls(), func(m string) bool { return !strings.HasSuffix(m, "KV/Txn") })); n != 5 {
		t.Errorf("%d txns seen, want 5: %q", n, p.Calls())
	}
}

// TestLedgerThroughLostAnswers: meshctl's etcd ledger, pointed at the
// proxy, requests one build while the answer of its Nth call is lost, for
// each call it makes (reads, the lease, the transaction). Each request
// still succeeds, and the ledger holds exactly one build: a retry finds
// the change its lost answer made.
func TestLedgerThroughLostAnswers(t *testing.T) {
	eps := strings.Split(etcdtest.Endpoints(t), ",")
	for n := 1; n <= 6; n++ {
		p, err := Start(eps[0], Rule{Nth: n, Action: LoseAnswer})
		if err != nil {
			t.Fatal(err)
		}
		l, err := ledger.OpenEtcd(ledger.EtcdConfig{Endpoints: []string{p.Addr()}, Prefix: etcdtest.Prefix(t.Name()), Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		if _, err := l.Request(ctx, []string{"web"}, ""); err != nil {
			t.Errorf("call #%d lost: request: %v", n, err)
		}
		bs, err := l.List(ctx, "web")
		if err != nil || len(bs) != 1 {
			t.Errorf("call #%d lost: %d builds, %v; want exactly one", n, len(bs), err)
		}
		cancel()
		if fired := p.Fired(); len(fired) != 1 {
			t.Errorf("call #%d: fired %q, want its answer lost (calls %q)", n, fired, p.Calls())
		} else {
			t.Logf("%s", fired[0])
		}
		l.Close()
		p.Close()
	}
}

// TestRuleFor: a rule with For refuses its Nth call and every later one for
// that long; then calls pass again.
func TestRuleFor(t *testing.T) {
	eps := strings.Split(etcdtest.Endpoints(t), ",")
	prefix := etcdtest.Prefix(t.Name())
	p, err := Start(eps[0], Rule{Method: "KV/Range", Nth: 2, Action: Refuse, For: 1500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	via := client(t, p.Addr())
	get := func() error {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := via.Get(ctx, prefix+"/k")
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("first get: %v", err)
	}
	begin := time.Now()
	for range 3 {
		if err := get(); err == nil {
			t.Fatal("a get within For came back, want it refused")
		}
	}
	for time.Since(begin) < 1500*time.Millisecond {
		time.Sleep(50 * time.Millisecond)
	}
	var err2 error
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		if err2 = get(); err2 == nil {
			break
		}
	}
	if err2 != nil {
		t.Fatalf("a get after For: %v", err2)
	}
	if n := len(p.Fired()); n < 3 {
		t.Errorf("fired %q, want the Nth and the gets after it", p.Fired())
	}
}
