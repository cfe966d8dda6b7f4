//go:build !noetcd

package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/state"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The keys of module's current gathering, under PREFIX/mesh/gatherings/MODULE/.
//
//   - doc is what the first join wrote. It has no lease.
//   - deadline lives under a lease of gather. It exists until the deadline.
//   - fence lives under a lease of twice gather. While it exists, a join of
//     the same step belongs to this gathering, even once it is over.
//   - joined/HOST lives under the member's session lease.
//   - joined-ever/HOST has no lease. So a lapse is told from a never-join.
//   - held/HOST, started, failed, end and closed/HOST are what they say.
//
// An over gathering is replaced by the next one. It is then kept, as one
// record, under PREFIX/mesh/gatherings-done/MODULE/ID.

// sessionTTL is the lease of a member's joined key. Tests shorten it.
var sessionTTL = WindowTTL

// gatheringsKept is how many replaced gatherings are kept per module.
const gatheringsKept = 20

type gatherDoc struct {
	ID        string        `json:"id"`
	Module    string        `json:"module"`
	Step      string        `json:"step"`
	Hash      string        `json:"hash"`
	Runner    string        `json:"runner"`
	Expected  []string      `json:"expected"`
	CreatedAt time.Time     `json:"created_at"`
	Timeout   time.Duration `json:"timeout"`
	Gather    time.Duration `json:"gather"`
}

type joinedRec struct {
	Host string    `json:"host"`
	PID  int       `json:"pid"`
	Hash string    `json:"hash"`
	At   time.Time `json:"at"`
}

type startRec struct {
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// failRec is why a gathering failed, and the kind of the error it gives.
type failRec struct {
	Why   string     `json:"why"`
	Kind  fault.Kind `json:"kind"`
	Hosts []string   `json:"hosts,omitempty"`
}

type closeRec struct {
	Back bool      `json:"back"`
	At   time.Time `json:"at"`
}

// doneRec is a replaced gathering, under gatherings-done/MODULE/ID.
type doneRec struct {
	Gathering Gathering `json:"gathering"`
	Failed    *failRec  `json:"failed,omitempty"`
}

func (f *failRec) err(g Gathering) error {
	return &GatherError{Kind: f.Kind, Module: g.Module, Step: g.Step, ID: g.ID, Why: f.Why, Hosts: f.Hosts}
}

func gatherErr(g Gathering, kind fault.Kind, why string, hosts ...string) error {
	return &GatherError{Kind: kind, Module: g.Module, Step: g.Step, ID: g.ID, Why: why, Hosts: hosts}
}

// gstate is a gathering as one read saw it, with what a write compares.
type gstate struct {
	g        Gathering
	found    bool
	archived bool
	fail     *failRec
	// rev is the read's revision. docRev is the doc's mod revision, and
	// doneRev the archived record's.
	rev, docRev, doneRev int64
	gather               time.Duration
	deadline, fence      bool
	deadlineLease        clientv3.LeaseID
	started              bool
	// joinedRev and joinedLease are joined/HOST's create revision and
	// lease, by host. A host absent has not joined, or lapsed.
	joinedRev   map[string]int64
	joinedLease map[string]clientv3.LeaseID
	ever        map[string]bool
	held        map[string]bool
	members     []Member
	done        []doneKey
}

type doneKey struct {
	key string
	rev int64
}

func (s *etcdStore) gatherKey(module, name string) string {
	return s.meshPrefix("gatherings", module) + name
}

// readGather reads module's current gathering in one transaction. With id,
// it also reads that gathering's archived record. With members, it reads
// the module's members and its archived keys.
func (s *etcdStore) readGather(ctx context.Context, cli *clientv3.Client, module, id string, members bool) (*gstate, error) {
	ops := []clientv3.Op{clientv3.OpGet(s.meshPrefix("gatherings", module), clientv3.WithPrefix())}
	if id != "" {
		ops = append(ops, clientv3.OpGet(s.meshKey("gatherings-done", module, id)))
	}
	if members {
		ops = append(ops, clientv3.OpGet(s.meshPrefix("members", module), clientv3.WithPrefix()),
			clientv3.OpGet(s.meshPrefix("gatherings-done", module), clientv3.WithPrefix(), clientv3.WithKeysOnly()))
	}
	resp, err := cli.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	st, err := s.decodeGather(module, resp.Responses[0].GetResponseRange().Kvs)
	if err != nil {
		return nil, err
	}
	st.rev = resp.Header.Revision
	rs := resp.Responses[1:]
	if id != "" {
		if kvs := rs[0].GetResponseRange().Kvs; (!st.found || st.g.ID != id) && len(kvs) == 1 {
			var d doneRec
			if err := json.Unmarshal(kvs[0].Value, &d); err != nil {
				return nil, corrupt(string(kvs[0].Key), err)
			}
			st = &gstate{g: d.Gathering, found: true, archived: true, fail: d.Failed, rev: st.rev, doneRev: kvs[0].ModRevision,
				started: !d.Gathering.StartedAt.IsZero()}
		}
		rs = rs[1:]
	}
	if members {
		for _, kv := range rs[0].GetResponseRange().Kvs {
			var m Member
			if err := json.Unmarshal(kv.Value, &m); err != nil {
				return nil, corrupt(string(kv.Key), err)
			}
			st.members = append(st.members, m)
		}
		for _, kv := range rs[1].GetResponseRange().Kvs {
			st.done = append(st.done, doneKey{string(kv.Key), kv.CreateRevision})
		}
	}
	st.g.Rev = st.rev
	return st, nil
}

// decodeGather decodes the keys of module's current gathering.
func (s *etcdStore) decodeGather(module string, kvs []*mvccpb.KeyValue) (*gstate, error) {
	st := &gstate{joinedRev: map[string]int64{}, joinedLease: map[string]clientv3.LeaseID{}, ever: map[string]bool{}, held: map[string]bool{}}
	prefix := s.meshPrefix("gatherings", module)
	var doc *gatherDoc
	joined := map[string]joinedRec{}
	closed := map[string]closeRec{}
	var started *startRec
	var end *StepEnd
	for _, kv := range kvs {
		kind, host, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), prefix), "/")
		var err error
		switch kind {
		case "doc":
			doc = &gatherDoc{}
			err = json.Unmarshal(kv.Value, doc)
			st.docRev = kv.ModRevision
		case "deadline":
			st.deadline, st.deadlineLease = true, clientv3.LeaseID(kv.Lease)
		case "fence":
			st.fence = true
		case "started":
			started = &startRec{}
			err = json.Unmarshal(kv.Value, started)
		case "failed":
			st.fail = &failRec{}
			err = json.Unmarshal(kv.Value, st.fail)
		case "end":
			end = &StepEnd{}
			err = json.Unmarshal(kv.Value, end)
		case "joined":
			var j joinedRec
			err = json.Unmarshal(kv.Value, &j)
			joined[host] = j
			st.joinedRev[host], st.joinedLease[host] = kv.CreateRevision, clientv3.LeaseID(kv.Lease)
		case "joined-ever":
			var j joinedRec
			err = json.Unmarshal(kv.Value, &j)
			st.ever[host] = true
			if _, ok := joined[host]; !ok {
				joined[host] = j
			}
		case "held":
			st.held[host] = true
		case "closed":
			var c closeRec
			err = json.Unmarshal(kv.Value, &c)
			closed[host] = c
		}
		if err != nil {
			return nil, corrupt(string(kv.Key), err)
		}
	}
	if doc == nil {
		return st, nil
	}
	st.found, st.gather, st.started = true, doc.Gather, started != nil
	g := Gathering{Module: doc.Module, Step: doc.Step, ID: doc.ID, Hash: doc.Hash, Runner: doc.Runner,
		Expected: slices.Sorted(slices.Values(doc.Expected)), CreatedAt: doc.CreatedAt,
		Deadline: doc.CreatedAt.Add(doc.Gather), Timeout: doc.Timeout, End: end}
	all := true
	for _, h := range g.Expected {
		m := GatherMember{Host: h, Joined: st.ever[h], Alive: st.joinedRev[h] != 0, Held: st.held[h]}
		if j, ok := joined[h]; ok {
			m.PID, m.Hash, m.JoinedAt = j.PID, j.Hash, j.At
		}
		if c, ok := closed[h]; ok {
			m.Closed, m.Back = true, c.Back
		}
		if !m.Alive || m.Hash != doc.Hash {
			all = false
		}
		g.Members = append(g.Members, m)
	}
	if started != nil {
		g.StartedAt = started.At
	}
	switch {
	case st.fail != nil:
		g.State, g.Failure = GatherFailed, st.fail.Why
	case end != nil:
		g.State = GatherEnded
	case started != nil:
		g.State = GatherStarted
	case all:
		g.State = GatherHolding
	default:
		g.State = GatherOpen
	}
	st.g = g
	return st, nil
}

// withDeadline sets g's Deadline from its lease's time to live, on this
// host's clock. It is for people only.
func withDeadline(ctx context.Context, cli *clientv3.Client, st *gstate) {
	if !st.deadline {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	if r, err := cli.TimeToLive(ctx, st.deadlineLease); err == nil && r.TTL >= 0 {
		st.g.Deadline = time.Now().Add(time.Duration(r.TTL) * time.Second)
	}
}

// failureOf is the failure a gathering not started has met, if any. A
// member's session lapsed, or the deadline passed with hosts missing.
func failureOf(st *gstate) *failRec {
	if !st.found || st.archived || st.fail != nil || st.started {
		return nil
	}
	var lapsed []string
	for _, h := range st.g.Expected {
		if st.ever[h] && st.joinedRev[h] == 0 {
			lapsed = append(lapsed, h)
		}
	}
	if len(lapsed) > 0 {
		return &failRec{Kind: fault.Failed, Hosts: lapsed,
			Why: fmt.Sprintf("%s session lapsed before the step started (the process died, or lost etcd)", hostsOf(lapsed))}
	}
	if missing := st.g.Missing(); !st.deadline && len(missing) > 0 {
		return &failRec{Kind: fault.Failed, Hosts: missing,
			Why: fmt.Sprintf("%s did not join by the deadline (gather %s)", HostsNamed(missing), st.gather)}
	}
	return nil
}

// hostsOf names hosts as a possessive: "host a's", "hosts a, b's".
func hostsOf(hosts []string) string { return HostsNamed(hosts) + "'s" }

// notStarted are the compares of a write before the start.
func (s *etcdStore) notStarted(st *gstate) []clientv3.Cmp {
	m := st.g.Module
	return []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(s.gatherKey(m, "doc")), "=", st.docRev),
		clientv3.Compare(clientv3.CreateRevision(s.gatherKey(m, "started")), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(s.gatherKey(m, "failed")), "=", 0),
	}
}

// writeFail fails st's gathering, if it has not started nor failed since
// the read. Whether it did, the caller reads again to see.
func (s *etcdStore) writeFail(ctx context.Context, st *gstate, f *failRec) error {
	b, _ := json.Marshal(f)
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := s.kv().Txn(ctx).If(s.notStarted(st)...).Then(clientv3.OpPut(s.gatherKey(st.g.Module, "failed"), string(b))).Commit()
		return err == nil, err
	})
}

// watchGather returns once a key of module's gathering changed after rev.
// A watch error or a compaction returns too: the caller reads again.
func (s *etcdStore) watchGather(ctx context.Context, cli *clientv3.Client, module string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	ch := cli.Watch(wctx, s.meshPrefix("gatherings", module), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for resp := range ch {
		if resp.Err() != nil {
			break
		}
		if len(resp.Events) > 0 {
			return nil
		}
	}
	// The watch ended without an event. A short pause keeps a cluster
	// without a leader from a busy loop.
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(200 * time.Millisecond):
		return nil
	}
}

func leaseSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}

func newGatherID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "g-" + now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// budgetOf is the smallest positive budget of own and the members'.
// Zero means none.
func budgetOf(own int, members []Member) int {
	b := max(own, 0)
	for _, m := range members {
		if m.MaxUnavailable > 0 && (b == 0 || m.MaxUnavailable < b) {
			b = m.MaxUnavailable
		}
	}
	return b
}

// membership is one host's Gathered on an etcd ledger.
type membership struct {
	l      *Ledger
	s      *etcdStore
	cli    *clientv3.Client
	j      Join
	lease  clientv3.LeaseID
	ttl    time.Duration
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	id       string
	runner   bool
	last     Gathering
	deadline time.Time
	closed   bool
	failed   bool
}

var _ Gathered = (*membership)(nil)

// JoinGathering joins j.Module's mesh window as j.Host. It creates the
// gathering when none is open, and the joiner is then its runner. A join
// after the deadline, after the start, or beside an open mesh window of
// another step is refused (GatherError, Busy). The member's session lease
// lives until Leave.
func (l *Ledger) JoinGathering(ctx context.Context, j Join) (Gathered, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return nil, err
	}
	if j.Module == "" || j.Step == "" || j.Host == "" || j.Gather <= 0 {
		return nil, fault.New(fault.BadInput, "join of a mesh window: module, step, host and a positive gather are needed")
	}
	m := &membership{l: l, s: s, cli: cli, j: j, ttl: sessionTTL, done: make(chan struct{})}
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		r, err := cli.Grant(ctx, leaseSeconds(m.ttl))
		if err != nil {
			return false, err
		}
		m.lease = r.ID
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := cli.KeepAlive(kctx, m.lease)
	if err != nil {
		cancel()
		m.revoke()
		return nil, s.failed(err)
	}
	m.cancel = cancel
	go m.keep(kctx, ch)
	if err := s.retry(ctx, m.tryJoin); err != nil {
		m.cancel()
		<-m.done
		m.revoke()
		return nil, err
	}
	return m, nil
}

func (m *membership) keep(kctx context.Context, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(m.done)
	for range ch {
	}
	if kctx.Err() == nil {
		m.l.warnf("mesh window %s/%s: this host's session on the gathering lapsed (etcd unreachable, or this process stopped, for %s)\n",
			m.j.Module, m.j.Step, m.ttl)
	}
}

func (m *membership) revoke() {
	ctx, cancel := context.WithTimeout(context.Background(), attempt)
	defer cancel()
	_, _ = m.cli.Revoke(ctx, m.lease)
}

// tryJoin is one try at the join. A session that lapsed before the join
// ends it: etcd refuses every key under its lease. Without this, each try
// would fail alike until the ledger's timeout, as etcd unreachable.
func (m *membership) tryJoin(ctx context.Context) (bool, error) {
	done, err := m.join(ctx)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return false, &GatherError{Kind: fault.Failed, Module: m.j.Module, Step: m.j.Step, Hosts: []string{m.j.Host},
			Why: fmt.Sprintf("host %s's session lapsed before it joined (etcd out of its reach for %s or more); join again", m.j.Host, m.ttl)}
	}
	return done, err
}

// join is one try at the join. It reads the gathering and the members at
// one revision, then writes with compares on what it read.
func (m *membership) join(ctx context.Context) (bool, error) {
	s, j := m.s, m.j
	st, err := s.readGather(ctx, m.cli, j.Module, "", true)
	if err != nil {
		return false, err
	}
	mv := decideJoin(st, j, m.lease)
	switch {
	case mv.own:
		return true, m.joined(ctx, st) // our own join, its answer lost
	case mv.create:
		return m.create(ctx, st)
	}
	if mv.fail != nil {
		if err := s.writeFail(ctx, st, mv.fail); err != nil {
			return false, err
		}
	}
	if mv.refuse != nil || mv.fail != nil {
		return false, mv.refuse // nil: read again, the gathering failed
	}
	cmps := append(s.notStarted(st),
		clientv3.Compare(clientv3.CreateRevision(s.gatherKey(j.Module, "deadline")), ">", 0),
		clientv3.Compare(clientv3.CreateRevision(s.gatherKey(j.Module, "joined/"+j.Host)), "=", 0))
	_, err = s.kv().Txn(ctx).If(cmps...).Then(m.joinOps()...).Commit()
	return false, err // read again: it finds the join its own, or what won
}

// joinMove is what a join does with a gathering as one read saw it. With
// none of own, create, refuse and fail set, it writes its join.
type joinMove struct {
	own    bool     // the read found this join, its answer lost
	create bool     // there is no gathering to join: begin one
	refuse error    // the join is refused (after writing fail, if set)
	fail   *failRec // the gathering fails first: write it, then read again
}

// decideJoin is what j's join does with st. lease is the joiner's session
// lease, 0 for a dry run's preview, which has none. The join and the
// preview decide alike, so a dry run says what a join would do.
func decideJoin(st *gstate, j Join, lease clientv3.LeaseID) joinMove {
	g := st.g
	if st.found && lease != 0 && st.joinedLease[j.Host] == lease {
		return joinMove{own: true}
	}
	over := st.fail != nil || g.End != nil
	if !st.found || over && (g.Step != j.Step || !st.fence) {
		return joinMove{create: true}
	}
	switch {
	case g.Step != j.Step:
		return joinMove{refuse: gatherErr(g, fault.Busy, fmt.Sprintf("a mesh window of %s for step %s is open (%s): one mesh window per module", j.Module, g.Step, g.State))}
	case st.fail != nil && st.deadline:
		return joinMove{refuse: st.fail.err(g)}
	case st.started:
		return joinMove{refuse: gatherErr(g, fault.Busy, fmt.Sprintf("host %s joined after the step started at %s", j.Host, state.When(g.StartedAt)))}
	case !st.deadline:
		return joinMove{fail: failureOf(st), refuse: gatherErr(g, fault.Busy,
			fmt.Sprintf("host %s joined after the deadline; a new mesh window of %s opens once this one is over and %s passed", j.Host, j.Module, 2*st.gather))}
	case !slices.Contains(g.Expected, j.Host):
		return joinMove{refuse: gatherErr(g, fault.Busy, fmt.Sprintf("host %s was not a member of %s when the gathering began: it joins the next one", j.Host, j.Module))}
	case st.joinedRev[j.Host] != 0:
		mem, _ := g.Member(j.Host)
		return joinMove{refuse: gatherErr(g, fault.Busy, fmt.Sprintf("host %s joined already, as pid %d", j.Host, mem.PID))}
	}
	if f := failureOf(st); f != nil {
		return joinMove{fail: f}
	}
	if j.Hash != g.Hash {
		return joinMove{fail: &failRec{Kind: fault.BadInput, Hosts: []string{g.Runner, j.Host},
			Why: fmt.Sprintf("host %s's step definition (hash %s) differs from host %s's (hash %s): apply the same mesh file on every host", j.Host, short(j.Hash), g.Runner, short(g.Hash))}}
	}
	if f := budgetFail(j, st.members, len(g.Expected)); f != nil {
		return joinMove{fail: f}
	}
	return joinMove{}
}

// expectedOf is who must join a gathering j begins on st: the module's
// members in etcd, sorted. A joiner that is not one is refused.
func expectedOf(st *gstate, j Join) ([]string, error) {
	var expected []string
	for _, mem := range st.members {
		expected = append(expected, mem.Host)
	}
	sort.Strings(expected)
	if !slices.Contains(expected, j.Host) {
		return expected, &GatherError{Kind: fault.BadInput, Module: j.Module, Step: j.Step, Hosts: []string{j.Host},
			Why: fmt.Sprintf("host %s is not a member of %s in etcd: its apply must record it first (meshctl apply on %s)", j.Host, j.Module, j.Host)}
	}
	return expected, nil
}

// PreviewJoin says what JoinGathering(j) would do now, and writes
// nothing: window run --dry-run. Its error is the refusal the join would
// end with, or the failure it would write first (a GatherError); any
// other error is etcd's.
func (l *Ledger) PreviewJoin(ctx context.Context, j Join) (JoinPreview, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return JoinPreview{}, err
	}
	var st *gstate
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		st, err = s.readGather(ctx, cli, j.Module, "", true)
		return err == nil, err
	})
	if err != nil {
		return JoinPreview{}, err
	}
	withDeadline(ctx, cli, st)
	mv := decideJoin(st, j, 0)
	if mv.create {
		expected, err := expectedOf(st, j)
		p := JoinPreview{Create: true, Hosts: expected}
		if err == nil {
			if f := budgetFail(j, st.members, len(expected)); f != nil {
				err = f.err(Gathering{Module: j.Module, Step: j.Step})
			}
		}
		return p, err
	}
	p := JoinPreview{Gathering: st.g, Hosts: st.g.Expected}
	switch {
	case mv.refuse != nil:
		return p, mv.refuse
	case mv.fail != nil:
		return p, mv.fail.err(st.g)
	}
	return p, nil
}

func short(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// budgetFail is the failure of a stopped hold under a budget below the
// hosts expected, if it is one.
func budgetFail(j Join, members []Member, expected int) *failRec {
	b := budgetOf(j.MaxUnavailable, members)
	if !j.Stopped || b == 0 || b >= expected {
		return nil
	}
	return &failRec{Kind: fault.BadInput, Why: fmt.Sprintf(
		"the step holds containers stopped on %d hosts, but max-unavailable of %s is %d: hold it changed, or raise the budget", expected, j.Module, b)}
}

func (m *membership) joinOps() []clientv3.Op {
	j := m.j
	b, _ := json.Marshal(joinedRec{Host: j.Host, PID: j.PID, Hash: j.Hash, At: m.l.now()})
	return []clientv3.Op{
		clientv3.OpPut(m.s.gatherKey(j.Module, "joined/"+j.Host), string(b), clientv3.WithLease(m.lease)),
		clientv3.OpPut(m.s.gatherKey(j.Module, "joined-ever/"+j.Host), string(b)),
	}
}

// create begins a new gathering. It replaces an over one, which is then
// archived, and prunes the archive to gatheringsKept.
func (m *membership) create(ctx context.Context, st *gstate) (bool, error) {
	s, j := m.s, m.j
	expected, err := expectedOf(st, j)
	if err != nil {
		return false, err
	}
	dl, err := m.cli.Grant(ctx, leaseSeconds(j.Gather))
	if err != nil {
		return false, err
	}
	fl, err := m.cli.Grant(ctx, leaseSeconds(2*j.Gather))
	if err != nil {
		return false, err
	}
	now := m.l.now()
	doc := gatherDoc{ID: newGatherID(now), Module: j.Module, Step: j.Step, Hash: j.Hash, Runner: j.Host,
		Expected: expected, CreatedAt: now, Timeout: j.Timeout, Gather: j.Gather}
	db, _ := json.Marshal(doc)
	docKey := s.gatherKey(j.Module, "doc")
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(docKey), "=", 0)}
	puts := []clientv3.Op{clientv3.OpPut(docKey, string(db)),
		clientv3.OpPut(s.gatherKey(j.Module, "deadline"), doc.ID, clientv3.WithLease(dl.ID)),
		clientv3.OpPut(s.gatherKey(j.Module, "fence"), doc.ID, clientv3.WithLease(fl.ID))}
	f := budgetFail(j, st.members, len(expected))
	if f != nil {
		fb, _ := json.Marshal(f)
		puts = append(puts, clientv3.OpPut(s.gatherKey(j.Module, "failed"), string(fb)))
	} else {
		puts = append(puts, m.joinOps()...)
	}
	prefix := s.meshPrefix("gatherings", j.Module)
	var ops []clientv3.Op
	if st.found {
		// Nothing of the old gathering changed since the read.
		cmps = []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(docKey), "=", st.docRev),
			clientv3.Compare(clientv3.ModRevision(prefix), "<", st.rev+1).WithPrefix()}
		rb, _ := json.Marshal(doneRec{Gathering: st.g, Failed: st.fail})
		ops = append(ops, clientv3.OpPut(s.meshKey("gatherings-done", j.Module, st.g.ID), string(rb)))
		sort.Slice(st.done, func(a, b int) bool { return st.done[a].rev < st.done[b].rev })
		for i := 0; i < len(st.done)+1-gatheringsKept; i++ {
			ops = append(ops, clientv3.OpDelete(st.done[i].key))
		}
	}
	ops = append(ops, deleteAround(prefix, puts)...)
	ops = append(ops, puts...)
	tr, err := s.kv().Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil || !tr.Succeeded {
		return false, err
	}
	if f != nil {
		return false, f.err(Gathering{Module: j.Module, Step: j.Step, ID: doc.ID})
	}
	return false, nil // read again: that read finds the join its own
}

// deleteAround deletes every key under prefix but those puts write. etcd
// refuses a transaction whose delete range holds a key it puts.
func deleteAround(prefix string, puts []clientv3.Op) []clientv3.Op {
	var keep []string
	for _, p := range puts {
		keep = append(keep, string(p.KeyBytes()))
	}
	sort.Strings(keep)
	var ops []clientv3.Op
	from := prefix
	for _, k := range keep {
		if from < k {
			ops = append(ops, clientv3.OpDelete(from, clientv3.WithRange(k)))
		}
		from = k + "\x00"
	}
	return append(ops, clientv3.OpDelete(from, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix))))
}

// joined completes a join that found its own key.
func (m *membership) joined(ctx context.Context, st *gstate) error {
	withDeadline(ctx, m.cli, st)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.id, m.runner, m.deadline = st.g.ID, st.g.Runner == m.j.Host, st.g.Deadline
	m.last = st.g
	return nil
}

func (m *membership) remember(st *gstate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.deadline.IsZero() {
		st.g.Deadline = m.deadline
	}
	m.last = st.g
	if st.g.State == GatherFailed {
		m.failed = true
	}
}

func (m *membership) Gathering() Gathering {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

func (m *membership) Runner() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runner
}

// read reads this membership's gathering, current or archived.
func (m *membership) read(ctx context.Context) (*gstate, error) {
	var st *gstate
	err := m.s.retry(ctx, func(ctx context.Context) (bool, error) {
		var err error
		st, err = m.readOnce(ctx)
		return err == nil, err
	})
	return st, err
}

func (m *membership) readOnce(ctx context.Context) (*gstate, error) {
	st, err := m.s.readGather(ctx, m.cli, m.j.Module, m.id, false)
	if err != nil {
		return nil, err
	}
	if !st.found || st.g.ID != m.id {
		return nil, fault.New(fault.Failed, "mesh window %s/%s: gathering %s is gone from etcd: etcd cannot say how it went", m.j.Module, m.j.Step, m.id)
	}
	m.remember(st)
	return st, nil
}

// errAgain asks a wait to read again at once.
var errAgain = errors.New("read again")

// wait reads the gathering until done says so. It fails on a failed
// gathering, and fails one that met a failure. Between reads it watches
// from the read's revision on, so it misses no change.
func (m *membership) wait(ctx context.Context, done func(st *gstate) (bool, error)) (*gstate, error) {
	var wrote int64 // the revision read before done's last write
	for {
		st, err := m.read(ctx)
		if err != nil {
			return nil, ctxErr(ctx, err)
		}
		if st.fail != nil {
			return st, st.fail.err(st.g)
		}
		if f := failureOf(st); f != nil {
			if err := m.s.writeFail(ctx, st, f); err != nil {
				return nil, ctxErr(ctx, err)
			}
			continue
		}
		if st.rev == wrote {
			// That write lost its compare, and nothing changed since.
			if err := m.s.watchGather(ctx, m.cli, m.j.Module, st.rev); err != nil {
				return st, err
			}
			continue
		}
		ok, err := done(st)
		switch {
		case errors.Is(err, errAgain):
			wrote = st.rev
			continue
		case err != nil:
			return st, ctxErr(ctx, err)
		case ok:
			return st, nil
		}
		if err := m.s.watchGather(ctx, m.cli, m.j.Module, st.rev); err != nil {
			return st, err
		}
	}
}

// ctxErr is ctx's error once it ended, else err.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

func (m *membership) AllJoined(ctx context.Context) (Gathering, error) {
	st, err := m.wait(ctx, func(st *gstate) (bool, error) {
		return st.g.State == GatherHolding || st.started, nil
	})
	if st == nil {
		return Gathering{}, err
	}
	return st.g, err
}

func (m *membership) Held(ctx context.Context) error {
	s, mod, host := m.s, m.j.Module, m.j.Host
	_, err := m.wait(ctx, func(st *gstate) (bool, error) {
		if st.held[host] || st.started {
			return true, nil
		}
		if st.archived {
			return false, fault.New(fault.Failed, "mesh window %s/%s: gathering %s is over", mod, m.j.Step, m.id)
		}
		cmps := append(s.notStarted(st), clientv3.Compare(clientv3.LeaseValue(s.gatherKey(mod, "joined/"+host)), "=", m.lease))
		b, _ := json.Marshal(struct {
			At time.Time `json:"at"`
		}{m.l.now()})
		err := s.retry(ctx, func(ctx context.Context) (bool, error) {
			_, err := s.kv().Txn(ctx).If(cmps...).Then(clientv3.OpPut(s.gatherKey(mod, "held/"+host), string(b))).Commit()
			return err == nil, err
		})
		if err != nil {
			return false, err
		}
		return false, errAgain
	})
	return err
}

func (m *membership) Start(ctx context.Context) error {
	if !m.Runner() {
		return fault.New(fault.Failed, "mesh window %s/%s: host %s does not run the step", m.j.Module, m.j.Step, m.j.Host)
	}
	s, mod := m.s, m.j.Module
	_, err := m.wait(ctx, func(st *gstate) (bool, error) {
		if st.started {
			return true, nil
		}
		if st.archived {
			return false, fault.New(fault.Failed, "mesh window %s/%s: gathering %s is over", mod, m.j.Step, m.id)
		}
		cmps := s.notStarted(st)
		for _, h := range st.g.Expected {
			if !st.held[h] || st.joinedRev[h] == 0 {
				return false, nil
			}
			// Each member is still in the session it held in.
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(s.gatherKey(mod, "joined/"+h)), "=", st.joinedRev[h]))
		}
		b, _ := json.Marshal(startRec{By: m.j.Host, At: m.l.now()})
		err := s.retry(ctx, func(ctx context.Context) (bool, error) {
			_, err := s.kv().Txn(ctx).If(cmps...).Then(clientv3.OpPut(s.gatherKey(mod, "started"), string(b))).Commit()
			return err == nil, err
		})
		if err != nil {
			return false, err
		}
		return false, errAgain
	})
	return err
}

func (m *membership) WaitStart(ctx context.Context) error {
	_, err := m.wait(ctx, func(st *gstate) (bool, error) { return st.started, nil })
	return err
}

func (m *membership) Fail(ctx context.Context, why string) error {
	st, err := m.read(ctx)
	if err != nil {
		return err
	}
	if st.fail != nil {
		return nil
	}
	if st.started {
		return fault.New(fault.Failed, "mesh window %s/%s: gathering %s started its step: it cannot fail now", m.j.Module, m.j.Step, m.id)
	}
	f := &failRec{Kind: fault.Failed, Why: fmt.Sprintf("host %s: %s", m.j.Host, why), Hosts: []string{m.j.Host}}
	if err := m.s.writeFail(ctx, st, f); err != nil {
		return err
	}
	// Read again: the write compared, and the step may have started first.
	return m.Fail(ctx, why)
}

func (m *membership) End(ctx context.Context, end StepEnd) error {
	if !m.Runner() {
		return fault.New(fault.Failed, "mesh window %s/%s: host %s does not run the step", m.j.Module, m.j.Step, m.j.Host)
	}
	return m.l.RecordEnd(ctx, m.j.Module, m.id, end)
}

func (m *membership) WaitEnd(ctx context.Context, until time.Time) (StepEnd, error) {
	wctx, cancel := context.WithDeadline(ctx, until)
	defer cancel()
	st, err := m.wait(wctx, func(st *gstate) (bool, error) { return st.g.End != nil, nil })
	if err != nil {
		if ctx.Err() == nil && wctx.Err() != nil {
			return StepEnd{}, context.DeadlineExceeded
		}
		return StepEnd{}, err
	}
	return *st.g.End, nil
}

func (m *membership) Closed(ctx context.Context, back bool) error {
	s, mod, host := m.s, m.j.Module, m.j.Host
	err := s.retry(ctx, func(ctx context.Context) (bool, error) {
		st, err := m.readOnce(ctx)
		if err != nil {
			return false, err
		}
		c := closeRec{Back: back, At: m.l.now()}
		if st.archived {
			d := doneRec{Gathering: st.g, Failed: st.fail}
			for i := range d.Gathering.Members {
				if d.Gathering.Members[i].Host == host {
					d.Gathering.Members[i].Closed, d.Gathering.Members[i].Back = true, back
				}
			}
			b, _ := json.Marshal(d)
			k := s.meshKey("gatherings-done", mod, m.id)
			tr, err := s.kv().Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", st.doneRev)).Then(clientv3.OpPut(k, string(b))).Commit()
			return err == nil && tr.Succeeded, err
		}
		b, _ := json.Marshal(c)
		tr, err := s.kv().Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(s.gatherKey(mod, "doc")), "=", st.docRev)).
			Then(clientv3.OpPut(s.gatherKey(mod, "closed/"+host), string(b))).Commit()
		return err == nil && tr.Succeeded, err
	})
	if err == nil {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
	}
	return err
}

func (m *membership) Leave() {
	m.cancel()
	<-m.done
	m.mu.Lock()
	revoke := m.closed || m.failed
	m.mu.Unlock()
	if revoke {
		m.revoke()
	}
}

// RecordEnd records the end of a started gathering's step. The runner's
// host calls it after its window died, once the step container exited. The
// same end recorded again is no change.
func (l *Ledger) RecordEnd(ctx context.Context, module, id string, end StepEnd) error {
	s, cli, err := l.etcd()
	if err != nil {
		return err
	}
	b, _ := json.Marshal(end)
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		st, err := s.readGather(ctx, cli, module, id, false)
		if err != nil {
			return false, err
		}
		g := st.g
		switch {
		case !st.found || g.ID != id:
			return false, fault.New(fault.BadInput, "no gathering %s of module %s in etcd", id, module)
		case g.End != nil && g.End.Result == end.Result && sameCode(g.End.Code, end.Code):
			return true, nil
		case g.End != nil:
			return false, gatherErr(g, fault.Conflict, fmt.Sprintf("its end is recorded already, as %s by %s", g.End.Result, g.End.By))
		case !st.started:
			return false, gatherErr(g, fault.Failed, "its step never started: it has no end to record")
		case st.archived:
			return false, gatherErr(g, fault.Failed, "it was replaced without an end")
		}
		mod := func(n string) string { return s.gatherKey(module, n) }
		_, err = s.kv().Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(mod("doc")), "=", st.docRev),
			clientv3.Compare(clientv3.CreateRevision(mod("started")), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(mod("end")), "=", 0)).
			Then(clientv3.OpPut(mod("end"), string(b))).Commit()
		if err != nil {
			return false, err
		}
		return false, nil // read again: it finds the end, ours or another
	})
}

func sameCode(a, b *int) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// Gathering reads module's current gathering, if any.
func (l *Ledger) Gathering(ctx context.Context, module string) (Gathering, bool, error) {
	return l.GatheringByID(ctx, module, "")
}

// GatheringByID reads one of module's gatherings, also one replaced since.
// An empty id reads the current one. A stale hold asks it whether its step
// may still run.
func (l *Ledger) GatheringByID(ctx context.Context, module, id string) (Gathering, bool, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return Gathering{}, false, err
	}
	var st *gstate
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		st, err = s.readGather(ctx, cli, module, id, false)
		return err == nil, err
	})
	if err != nil || !st.found || id != "" && st.g.ID != id {
		return Gathering{}, false, err
	}
	withDeadline(ctx, cli, st)
	st.g.Rev = st.rev
	return st.g, true, nil
}

// Gatherings reads every module's current gathering, in one read, sorted
// by module.
func (l *Ledger) Gatherings(ctx context.Context) ([]Gathering, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return nil, err
	}
	var out []*gstate
	var rev int64
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Txn(ctx).Then(clientv3.OpGet(s.meshPrefix("gatherings", ""), clientv3.WithPrefix())).Commit()
		if err != nil {
			return false, err
		}
		rev = resp.Header.Revision
		byModule := map[string][]*mvccpb.KeyValue{}
		for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
			mod, _, _ := strings.Cut(strings.TrimPrefix(string(kv.Key), s.meshPrefix("gatherings", "")), "/")
			byModule[mod] = append(byModule[mod], kv)
		}
		out = out[:0]
		for _, mod := range slices.Sorted(maps.Keys(byModule)) {
			st, err := s.decodeGather(mod, byModule[mod])
			if err != nil {
				return false, err
			}
			if st.found {
				out = append(out, st)
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	var gs []Gathering
	for _, st := range out {
		withDeadline(ctx, cli, st)
		st.g.Rev = rev
		gs = append(gs, st.g)
	}
	return gs, nil
}
