//go:build !noetcd

package ledger

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/meshctl/meshctl/pkg/fault"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// OpenEtcd returns the ledger kept in the etcd cluster of cfg. It does not
// dial, the first operation does. So a command that never needs the ledger
// never contacts it. Close it when done.
func OpenEtcd(cfg EtcdConfig) (*Ledger, error) {
	s, err := newEtcdStore(cfg)
	if err != nil {
		return nil, err
	}
	l := &Ledger{st: s}
	s.retain, s.entropy = l.retain, l.entropy
	return l, nil
}

// etcdStore keeps the ledger in etcd, under PREFIX/ledger/. Its keys are
// these.
//
//   - last is the body of the last id issued.
//   - b/ID is a build. It holds the module, plan and request time, and the
//     record once recorded.
//   - head/MODULE is the module's current build.
//   - kept/MODULE lists the ids of its builds kept in full, in record order.
//     Past Retain, the oldest one other than the current is pruned to its
//     compact record. The file ledger prunes its chunks the same way.
//   - plan/ID is a plan, with the builds it asked for.
//   - answer/KEY is what an operation answered, by idempotency key. It lives
//     under a lease of a day (answerLease).
//   - importing exists only while an import is written (load). Every
//     operation refuses the ledger until it is gone.
//
// Each change is one transaction that compares the mod revision of every key
// it read. It runs again from fresh reads when it loses a compare, because
// another host wrote first. It also runs again when its answer is lost in
// flight.
type etcdStore struct {
	cfg EtcdConfig
	cli *clientv3.Client
	tls *tls.Config
	// wrapKV stands between the transactions and the cluster. Only tests set
	// it, to lose an answer in flight.
	wrapKV func(clientv3.KV) clientv3.KV
	// retain is the Ledger's Retain, how many builds of a module are kept in
	// full.
	retain func() int
	// entropy is the Ledger's Entropy, the random low bits of ids.
	entropy func() io.Reader
	// lease is what answers are written under (answerLease).
	leaseMu sync.Mutex
	lease   clientv3.LeaseID
}

func newEtcdStore(cfg EtcdConfig) (*etcdStore, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("etcd ledger: no endpoint")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 20 * time.Second
	}
	s := &etcdStore{cfg: cfg}
	if cfg.CA != "" || cfg.Cert != "" || cfg.Key != "" {
		if (cfg.Cert == "") != (cfg.Key == "") {
			return nil, errors.New("etcd ledger: give --ledger-cert and --ledger-key together")
		}
		info := transport.TLSInfo{TrustedCAFile: cfg.CA, CertFile: cfg.Cert, KeyFile: cfg.Key}
		t, err := info.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("etcd ledger TLS: %w", err)
		}
		s.tls = t
	}
	return s, nil
}

func (s *etcdStore) client() (*clientv3.Client, error) {
	if s.cli != nil {
		return s.cli, nil
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            s.cfg.Endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		TLS:                  s.tls,
		Username:             s.cfg.Username,
		Password:             s.cfg.Password,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, s.failed(err)
	}
	s.cli = cli
	return cli, nil
}

func (s *etcdStore) close() error {
	if s.cli == nil {
		return nil
	}
	return s.cli.Close()
}

func (s *etcdStore) describe() string {
	return "etcd://" + strings.Join(s.cfg.Endpoints, ",") + s.cfg.Prefix
}

func (s *etcdStore) unreachable(err error) error {
	return &UnreachableError{Endpoints: s.cfg.Endpoints, Err: err}
}

// failed is err of one call that is not retried. It is a *RefusedError when
// the cluster refused, else an *UnreachableError.
func (s *etcdStore) failed(err error) error {
	if r := s.refusal(err); r != nil {
		return r
	}
	return s.unreachable(err)
}

func (s *etcdStore) key(parts ...string) string {
	return s.cfg.Prefix + "/ledger/" + strings.Join(parts, "/")
}

// retry runs op until it succeeds or the budget is spent. It also stops at an
// error of the ledger rather than the cluster. And it stops at a refusal,
// which the cluster would give again. A lost compare, an unavailable member,
// a leader change and a lost answer alike run op again.
func (s *etcdStore) retry(ctx context.Context, op func(ctx context.Context) (done bool, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var last error
	for n := 0; ; n++ {
		if n > 0 {
			// Backoff with jitter spreads writers that lost to each other.
			d := time.Duration(min(n, 8)) * (5*time.Millisecond + rand.N(20*time.Millisecond))
			select {
			case <-ctx.Done():
				return s.budgetSpent(ctx, last)
			case <-time.After(d):
			}
		}
		actx, acancel := context.WithTimeout(ctx, attempt)
		done, err := op(actx)
		acancel()
		var le ledgerError
		switch {
		case err == nil && done:
			return nil
		case err != nil && errors.As(err, &le):
			return err
		case err != nil:
			if r := s.refusal(err); r != nil {
				return r
			}
			last = err
		}
		if ctx.Err() != nil {
			return s.budgetSpent(ctx, last)
		}
	}
}

func (s *etcdStore) budgetSpent(ctx context.Context, last error) error {
	if errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	if last == nil {
		last = fmt.Errorf("no transaction won its compare within %s", s.cfg.Timeout)
	}
	return s.unreachable(last)
}

// ledgerError marks the errors that are the ledger's answer, never retried.
// An unknown id and a conflict are such answers.
type ledgerError interface{ Fault() fault.Kind }

func (s *etcdStore) update(ctx context.Context, fn func(tx txn) error) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	var kv clientv3.KV = cli
	if s.wrapKV != nil {
		kv = s.wrapKV(kv)
	}
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		tx := &etcdTx{s: s, kv: kv, ctx: ctx, seen: map[string]int64{}, vals: map[string][]byte{}, writes: map[string][]byte{}}
		if err := tx.checkImporting(); err != nil {
			return false, err
		}
		if err := fn(tx); err != nil {
			return false, err
		}
		return tx.commit()
	})
}

func (s *etcdStore) view(ctx context.Context, fn func(v view) error) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		tx := &etcdTx{s: s, kv: cli, ctx: ctx, seen: map[string]int64{}, vals: map[string][]byte{}, writes: map[string][]byte{}}
		if err := tx.checkImporting(); err != nil {
			return false, err
		}
		return true, fn(tx)
	})
}

// current is one linearizable read, a read-only transaction. It is never a
// serializable or historical read. So it sees a build recorded before it
// began.
func (s *etcdStore) current(ctx context.Context, module string) (*record, error) {
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	var cur *record
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		// One read-only transaction reads the head, unless an import is under
		// way.
		resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.key("importing")), "=", 0)).
			Then(clientv3.OpGet(s.key("head", module))).Commit()
		if err != nil {
			return false, err
		}
		if !resp.Succeeded {
			return false, &ImportingError{Where: s.describe()}
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		cur = nil
		if len(kvs) == 1 {
			cur = &record{}
			if err := json.Unmarshal(kvs[0].Value, cur); err != nil {
				return false, corrupt(string(kvs[0].Key), err)
			}
		}
		return true, nil
	})
	return cur, err
}

func (s *etcdStore) modules(ctx context.Context) ([]string, error) {
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	var out []string
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Get(ctx, s.key("head")+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			return false, err
		}
		out = out[:0]
		for _, kv := range resp.Kvs {
			out = append(out, path.Base(string(kv.Key)))
		}
		return true, nil
	})
	return out, err
}

// buildDoc is the value of b/ID. It is a build, pending until Record is set.
type buildDoc struct {
	Module      string    `json:"module"`
	Plan        string    `json:"plan"`
	RequestedAt time.Time `json:"requested_at"`
	Record      *record   `json:"record,omitempty"`
	// Pruned is what is left of a build a file ledger had pruned before it
	// was imported here.
	Pruned *compact `json:"pruned,omitempty"`
}

// etcdTx reads at one revision, the first read's. It commits its writes in
// one transaction that compares the mod revision of every key it read.
type etcdTx struct {
	s      *etcdStore
	kv     clientv3.KV
	ctx    context.Context
	rev    int64
	seen   map[string]int64  // key read → its mod revision (0: absent)
	vals   map[string][]byte // key read → its value
	writes map[string][]byte // key → new value
	order  []string
	builds map[string]buildDoc // every build, once read by a range
}

func (t *etcdTx) get(key string) ([]byte, bool, error) {
	if v, ok := t.writes[key]; ok {
		return v, true, nil
	}
	if _, ok := t.seen[key]; ok {
		v := t.vals[key]
		return v, v != nil, nil
	}
	var opts []clientv3.OpOption
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.kv.Get(t.ctx, key, opts...)
	if err != nil {
		return nil, false, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	t.seen[key] = 0
	if len(resp.Kvs) == 1 {
		t.seen[key] = resp.Kvs[0].ModRevision
		t.vals[key] = resp.Kvs[0].Value
		return resp.Kvs[0].Value, true, nil
	}
	return nil, false, nil
}

func (t *etcdTx) getJSON(key string, v any) (bool, error) {
	b, ok, err := t.get(key)
	if err != nil || !ok {
		return false, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return false, corrupt(key, err)
	}
	return true, nil
}

func (t *etcdTx) put(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the ledger's own types always marshal
	}
	if _, ok := t.writes[key]; !ok {
		t.order = append(t.order, key)
	}
	t.writes[key] = b
}

// corrupt reports a value in etcd that does not parse. It is bad input
// (exit 2), like a state file that does not parse.
func corrupt(key string, err error) error {
	return fault.New(fault.BadInput, "etcd key %s does not parse: %v; it was not written by this meshctl", key, err)
}

// answerTTL is how long an answer is kept for a retry to find. A retry comes
// within seconds. Answers live under a lease of answerTTL, which the cluster
// counts by its leader's ticks. So no host's clock, however far ahead,
// forgets another's answer early.
const answerTTL = 24 * time.Hour

// answerLease returns the lease this store's answers are written under. It is
// granted at the first write, one per process.
func (s *etcdStore) answerLease(ctx context.Context, kv clientv3.Lease) (clientv3.LeaseID, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if s.lease != clientv3.NoLease {
		return s.lease, nil
	}
	resp, err := kv.Grant(ctx, int64(answerTTL/time.Second))
	if err != nil {
		return clientv3.NoLease, err
	}
	s.lease = resp.ID
	return s.lease, nil
}

func (t *etcdTx) commit() (bool, error) {
	if len(t.writes) == 0 {
		return true, nil
	}
	var cmps []clientv3.Cmp
	for k, rev := range t.seen {
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "=", rev))
	}
	var ops []clientv3.Op
	for _, k := range t.order {
		var opts []clientv3.OpOption
		if strings.HasPrefix(k, t.s.key("answer")+"/") {
			lease, err := t.s.answerLease(t.ctx, t.s.cli)
			if err != nil {
				return false, err
			}
			opts = append(opts, clientv3.WithLease(lease))
		}
		ops = append(ops, clientv3.OpPut(k, string(t.writes[k]), opts...))
	}
	// Read at the revision the transaction read at, which fails once it is
	// compacted. Take a transaction that read before a snapshot restore (with
	// --mark-compacted) and commits after it. Without this read it would pass
	// its compares against the restored keys. It would then issue the ids
	// that the restore lost, issued by a transaction that read at the same
	// revision. The model docs/model/ledger-etcd.pml found this
	// (BROKEN_NO_COMPACT_CHECK).
	if t.rev > 0 {
		ops = append(ops, clientv3.OpGet(t.s.key("last"), clientv3.WithRev(t.rev), clientv3.WithCountOnly()))
	}
	resp, err := t.kv.Txn(t.ctx).If(cmps...).Then(ops...).Commit()
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		t.s.leaseMu.Lock()
		t.s.lease = clientv3.NoLease // lapsed (a process older than a day): grant another
		t.s.leaseMu.Unlock()
	}
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

func (t *etcdTx) build(id string) (*pendingRec, *found, error) {
	var d buildDoc
	ok, err := t.getJSON(t.s.key("b", id), &d)
	if err != nil || !ok {
		return nil, nil, err
	}
	if d.Pruned != nil {
		return nil, &found{module: d.Module, pruned: d.Pruned}, nil
	}
	if d.Record == nil {
		return &pendingRec{Module: d.Module, Plan: d.Plan, RequestedAt: d.RequestedAt}, nil, nil
	}
	return nil, &found{module: d.Module, full: d.Record}, nil
}

func (t *etcdTx) currentOf(m string) (*record, error) {
	var r record
	ok, err := t.getJSON(t.s.key("head", m), &r)
	if err != nil || !ok {
		return nil, err
	}
	return &r, nil
}

func (t *etcdTx) plan(id string) (planRec, bool, error) {
	var pr planRec
	ok, err := t.getJSON(t.s.key("plan", id), &pr)
	return pr, ok, err
}

// all reads every build, at the transaction's revision. Only list uses it.
func (t *etcdTx) all() (map[string]buildDoc, error) {
	if t.builds != nil {
		return t.builds, nil
	}
	opts := []clientv3.OpOption{clientv3.WithPrefix()}
	if t.rev != 0 {
		opts = append(opts, clientv3.WithRev(t.rev))
	}
	resp, err := t.kv.Get(t.ctx, t.s.key("b")+"/", opts...)
	if err != nil {
		return nil, err
	}
	if t.rev == 0 {
		t.rev = resp.Header.Revision
	}
	t.builds = map[string]buildDoc{}
	for _, kv := range resp.Kvs {
		var d buildDoc
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			return nil, corrupt(string(kv.Key), err)
		}
		t.builds[path.Base(string(kv.Key))] = d
	}
	return t.builds, nil
}

func (t *etcdTx) modules() ([]string, error) {
	all, err := t.all()
	if err != nil {
		return nil, err
	}
	var ms []string
	for _, d := range all {
		if !slices.Contains(ms, d.Module) {
			ms = append(ms, d.Module)
		}
	}
	slices.Sort(ms)
	return ms, nil
}

func (t *etcdTx) pending(m string) (map[string]pendingRec, error) {
	all, err := t.all()
	if err != nil {
		return nil, err
	}
	out := map[string]pendingRec{}
	for id, d := range all {
		if d.Module == m && d.Record == nil && d.Pruned == nil {
			out[id] = pendingRec{Module: d.Module, Plan: d.Plan, RequestedAt: d.RequestedAt}
		}
	}
	return out, nil
}

// retained is every build of m kept in full. The pruned ones keep only their
// compact record.
func (t *etcdTx) retained(m string) ([]record, error) {
	all, err := t.all()
	if err != nil {
		return nil, err
	}
	var out []record
	for _, d := range all {
		if d.Module == m && d.Record != nil {
			out = append(out, *d.Record)
		}
	}
	return out, nil
}

// etcdIDsPerTxn is how many ids one request transaction issues. Each id is a
// write of b/ID. The plan, last, the answer and the read at the transaction's
// revision come besides. All must fit in etcd's default --max-txn-ops of 128.
const etcdIDsPerTxn = 118

func (s *etcdStore) idsPerChange() int { return etcdIDsPerTxn }

// issue issues ids after the last one the cluster issued. The transaction
// compares "last". So of two hosts that read the same last id, one loses its
// compare and issues again after the other. The order is the cluster's. A
// host's clock gives only the time an id carries. Each id also carries the
// revision the transaction read at (clusterSeq). So no two transactions issue
// the same id, whatever the clocks, even across a snapshot restore. After a
// restore or an import, last is what that ledger issued. So ids go on
// increasing from there.
func (t *etcdTx) issue(n int, now time.Time) ([]string, error) {
	if n > maxIDsPerTxn {
		return nil, fmt.Errorf("%d ids in one transaction: at most %d", n, maxIDsPerTxn)
	}
	b, _, err := t.get(t.s.key("last"))
	if err != nil {
		return nil, err
	}
	last, ok := parseSeq(string(b))
	if b != nil && !ok {
		return nil, corrupt(t.s.key("last"), fmt.Errorf("malformed id %q", b))
	}
	var out []string
	for i := range n {
		s, err := clusterSeq(last, now, t.rev, i, t.s.entropy())
		if err != nil {
			return nil, err
		}
		last = s
		out = append(out, s.String())
	}
	if _, ok := t.writes[t.s.key("last")]; !ok {
		t.order = append(t.order, t.s.key("last"))
	}
	t.writes[t.s.key("last")] = []byte(last.String())
	return out, nil
}

func (t *etcdTx) addPending(id string, p pendingRec) {
	t.put(t.s.key("b", id), buildDoc{Module: p.Module, Plan: p.Plan, RequestedAt: p.RequestedAt})
}

func (t *etcdTx) putPlan(pr planRec) { t.put(t.s.key("plan", pr.ID), pr) }

// prunePerRecord bounds the builds one record prunes, and so the size of its
// transaction. An import may leave many more than Retain to prune.
const prunePerRecord = 16

func (t *etcdTx) putRecord(m string, rec record) error {
	var d buildDoc
	if _, err := t.getJSON(t.s.key("b", rec.ID), &d); err != nil {
		return err
	}
	d.Record = &rec
	t.put(t.s.key("b", rec.ID), d)
	cur, err := t.currentOf(m)
	if err != nil {
		return err
	}
	if rec.Outcome == OutcomeCurrent {
		t.put(t.s.key("head", m), rec)
		cur = &rec
	}
	var kept []string
	if _, err := t.getJSON(t.s.key("kept", m), &kept); err != nil {
		return err
	}
	kept = append(kept, rec.ID)
	for n := 0; len(kept) > t.s.retain() && n < prunePerRecord; n++ {
		old := kept[0]
		kept = kept[1:]
		if cur != nil && old == cur.ID {
			continue // the current build stays in full, in head/ and b/
		}
		var od buildDoc
		if ok, err := t.getJSON(t.s.key("b", old), &od); err != nil {
			return err
		} else if !ok || od.Record == nil {
			continue
		}
		c := od.Record.compact()
		od.Record, od.Pruned = nil, &c
		t.put(t.s.key("b", old), od)
	}
	t.put(t.s.key("kept", m), kept)
	return nil
}

func (t *etcdTx) answer(key string) ([]byte, bool, error) { return t.get(t.s.key("answer", key)) }

func (t *etcdTx) putAnswer(key string, v []byte) {
	k := t.s.key("answer", key)
	if _, ok := t.writes[k]; !ok {
		t.order = append(t.order, k)
	}
	t.writes[k] = v
}

func (s *etcdStore) dump(ctx context.Context) (*dump, error) {
	var d *dump
	err := s.view(ctx, func(v view) error {
		t := v.(*etcdTx)
		last, _, err := t.get(t.s.key("last"))
		if err != nil {
			return err
		}
		all, err := t.all()
		if err != nil {
			return err
		}
		resp, err := t.kv.Get(t.ctx, t.s.key("plan")+"/", clientv3.WithPrefix(), clientv3.WithRev(t.rev))
		if err != nil {
			return err
		}
		known := map[string]time.Time{}
		for _, kv := range resp.Kvs {
			var p planRec
			if err := json.Unmarshal(kv.Value, &p); err != nil {
				return corrupt(string(kv.Key), err)
			}
			known[p.ID] = p.RequestedAt
		}
		d = &dump{last: string(last)}
		for id, b := range all {
			d.builds = append(d.builds, dumpBuild{id: id, module: b.Module,
				pending: pendingRec{Module: b.Module, Plan: b.Plan, RequestedAt: b.RequestedAt}, record: b.Record, pruned: b.Pruned})
		}
		sort.Slice(d.builds, func(i, j int) bool { return d.builds[i].id < d.builds[j].id })
		d.plans = plansOf(d.builds, known)
		return nil
	})
	return d, err
}

// importBatch is how many keys one import transaction writes. etcd takes 128
// operations per transaction by default.
const importBatch = 100

// importMarker is the value of PREFIX/ledger/importing while an import is
// under way. It names the export being written. So the same import run again
// resumes it, and no other import mixes with it.
type importMarker struct {
	Digest string `json:"digest"`
	Builds int    `json:"builds"`
}

// checkImporting refuses a ledger under import. Every transaction reads the
// marker, so it compares it too. It loses its compare if an import begins
// before it commits.
func (t *etcdTx) checkImporting() error {
	_, ok, err := t.get(t.s.key("importing"))
	if err != nil {
		return err
	}
	if ok {
		return &ImportingError{Where: t.s.describe()}
	}
	return nil
}

// load writes d into an empty prefix. The ledger is never seen half imported.
// A first transaction requires the prefix empty and writes the marker
// "importing". Every other operation refuses a ledger with the marker
// (ImportingError). Then the builds, plans and heads go in batches. Each
// batch requires that the marker is still ours. A last transaction deletes
// the marker and writes "last". From then on the ledger is whole and issues
// ids after the imported ones. Killed anywhere, the same import run again
// finds its marker and writes everything again. Each write puts a value, so
// once or twice is the same. Another import is refused.
func (s *etcdStore) load(ctx context.Context, d *dump) error {
	cli, err := s.client()
	if err != nil {
		return err
	}
	var kv clientv3.KV = cli
	if s.wrapKV != nil {
		kv = s.wrapKV(kv)
	}
	ops := s.importOps(d)
	sum := sha256.New()
	for _, op := range ops {
		fmt.Fprintf(sum, "%q %q\n", op.KeyBytes(), op.ValueBytes())
	}
	fmt.Fprintf(sum, "last %q\n", d.last)
	mb, _ := json.Marshal(importMarker{Digest: hex.EncodeToString(sum.Sum(nil)), Builds: len(d.builds)})
	marker := string(mb)
	mkey := s.key("importing")

	// Write the marker, for a new import into an empty prefix, or resume
	// ours.
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := kv.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(s.cfg.Prefix+"/ledger/"), "=", 0).WithPrefix()).
			Then(clientv3.OpPut(mkey, marker)).
			Else(clientv3.OpGet(mkey)).Commit()
		if err != nil {
			return false, err
		}
		if resp.Succeeded {
			return true, nil
		}
		got := resp.Responses[0].GetResponseRange().Kvs
		if len(got) == 1 && string(got[0].Value) == marker {
			return true, nil // ours, interrupted (or our own answer lost): resume
		}
		if len(got) == 1 {
			return false, notEmpty(s.describe() + " (another import into it was interrupted: run that one again to finish it)")
		}
		return false, notEmpty(s.describe())
	})
	if err != nil {
		return err
	}
	ours := clientv3.Compare(clientv3.Value(mkey), "=", marker)
	lostMarker := notEmpty(s.describe() + " (its import marker changed during the import)")
	for len(ops) > 0 {
		batch := ops[:min(importBatch, len(ops))]
		ops = ops[len(batch):]
		err := s.retry(ctx, func(ctx context.Context) (bool, error) {
			resp, err := kv.Txn(ctx).If(ours).Then(batch...).Commit()
			if err != nil {
				return false, err
			}
			if !resp.Succeeded {
				return false, lostMarker
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	// Publish. The marker goes and last comes, in one transaction.
	publish := []clientv3.Op{clientv3.OpDelete(mkey)}
	if d.last != "" {
		publish = append(publish, clientv3.OpPut(s.key("last"), d.last))
	}
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := kv.Txn(ctx).If(ours).Then(publish...).Else(clientv3.OpGet(mkey), clientv3.OpGet(s.key("last"))).Commit()
		if err != nil {
			return false, err
		}
		if resp.Succeeded {
			return true, nil
		}
		// We may have published already, if our answer was lost in flight.
		m, l := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
		if len(m) == 0 && (d.last == "" && len(l) == 0 || len(l) == 1 && string(l[0].Value) == d.last) {
			return true, nil
		}
		return false, lostMarker
	})
}

// importOps are the writes of d's builds, heads, kept lists and plans, in a
// fixed order.
func (s *etcdStore) importOps(d *dump) []clientv3.Op {
	heads := map[string]*record{}
	kept := map[string][]string{}
	var ops []clientv3.Op
	put := func(key string, v any) {
		b, _ := json.Marshal(v)
		ops = append(ops, clientv3.OpPut(key, string(b)))
	}
	for _, b := range d.builds {
		put(s.key("b", b.id), buildDoc{Module: b.module, Plan: b.pending.Plan, RequestedAt: b.pending.RequestedAt, Record: b.record, Pruned: b.pruned})
		if b.record != nil && b.record.Outcome == OutcomeCurrent {
			heads[b.module] = b.record // in id order: the last one is current
		}
		if b.record != nil {
			kept[b.module] = append(kept[b.module], b.id)
		}
	}
	for _, m := range slices.Sorted(maps.Keys(heads)) {
		put(s.key("head", m), heads[m])
	}
	for _, m := range slices.Sorted(maps.Keys(kept)) {
		put(s.key("kept", m), kept[m])
	}
	for _, p := range d.plans {
		put(s.key("plan", p.ID), p)
	}
	return ops
}

// refusal returns the *RefusedError for err when running the operation again
// cannot succeed, else nil. A nil answer means err is worth another attempt.
// A member down, a leader change, a timeout and a lost answer are such
// errors.
func (s *etcdStore) refusal(err error) error {
	var why string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrAuthFailed):
		why = "authentication failed: check MESHCTL_LEDGER_USER and MESHCTL_LEDGER_PASSWORD"
	case errors.Is(err, rpctypes.ErrAuthNotEnabled):
		why = "a user was given, but the cluster has authentication off: unset MESHCTL_LEDGER_USER and MESHCTL_LEDGER_PASSWORD"
	case errors.Is(err, rpctypes.ErrUserEmpty):
		why = "authentication failed: MESHCTL_LEDGER_USER is empty"
	case errors.Is(err, rpctypes.ErrPermissionDenied):
		why = fmt.Sprintf("permission denied: the user's role cannot read or write %s/ (give it readwrite on the prefix; see docs/mesh.md)", s.cfg.Prefix)
	case errors.Is(err, rpctypes.ErrTooManyOps):
		why = "too many operations in txn request: the cluster's --max-txn-ops is below the 128 meshctl needs; raise it"
	case errors.Is(err, rpctypes.ErrRequestTooLarge):
		why = "request is too large for the cluster's --max-request-bytes; raise it"
	case errors.Is(err, rpctypes.ErrNoSpace):
		why = "database space exceeded: compact and defragment the cluster, then disarm the alarm (etcdctl alarm disarm)"
	case errors.Is(err, rpctypes.ErrCorrupt):
		why = "the cluster reports itself corrupt: restore it (docs/mesh.md, Backup)"
	case strings.Contains(err.Error(), "authentication handshake failed"), strings.Contains(err.Error(), "x509:"):
		why = "the TLS handshake failed: check --ledger-ca, --ledger-cert and --ledger-key"
	default:
		return nil
	}
	return &RefusedError{Endpoints: s.cfg.Endpoints, Why: why, Err: err}
}

// EtcdClient says whether this build has the etcd client (noetcd.go).
const EtcdClient = true
