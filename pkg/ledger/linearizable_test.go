package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/meshctl/meshctl/internal/etcdtest"
)

// The linearizability checks: clients run request, record and current
// concurrently against one ledger, each operation's call and return time is
// kept, and porcupine checks that the history is that of a sequential
// ledger (ledgerModel) run in some order consistent with those times.

type linInput struct {
	op    string // request | record | current
	id    string // record
	image string // record; "" = failed
}

type linOutput struct {
	id      string  // request: the id issued; current: the current id ("" none)
	image   string  // current
	outcome Outcome // record
	cur     string  // record: the current id after it
	unknown bool    // the call failed: it may or may not have taken effect
}

// linState is the sequential ledger: the last id issued, the current
// build, and the first outcome of every recorded build. It is a string, so
// that states compare and hash as values.
type linState struct {
	last, curID, curImage string
	recorded              string // "id=image>outcome;" sorted by id
}

func (s linState) outcomeOf(id string) (image string, o Outcome, ok bool) {
	i := strings.Index(s.recorded, id+"=")
	if i < 0 {
		return "", "", false
	}
	rest := s.recorded[i+len(id)+1:]
	rest = rest[:strings.IndexByte(rest, ';')]
	image, out, _ := strings.Cut(rest, ">")
	return image, Outcome(out), true
}

func (s linState) with(id, image string, o Outcome) linState {
	recs := strings.Split(strings.TrimSuffix(s.recorded, ";"), ";")
	if s.recorded == "" {
		recs = nil
	}
	recs = append(recs, id+"="+image+">"+string(o))
	slices.Sort(recs)
	s.recorded = strings.Join(recs, ";") + ";"
	if o == OutcomeCurrent {
		s.curID, s.curImage = id, image
	}
	return s
}

// ledgerModel is the ledger's rule as a sequential specification, written
// from CONTRACT §7 rather than from Decide: ids increase in request order,
// a build becomes current only if no later-requested build is, a record
// again returns its first outcome, current is the current build.
var ledgerModel = porcupine.NondeterministicModel{
	Init: func() []any { return []any{linState{}} },
	Step: func(st, in, out any) []any {
		s, i, o := st.(linState), in.(linInput), out.(linOutput)
		switch i.op {
		case "request":
			if o.id > s.last {
				s.last = o.id
				return []any{s}
			}
		case "current":
			if o.id == s.curID && o.image == s.curImage {
				return []any{s}
			}
		case "record":
			if img, first, ok := s.outcomeOf(i.id); ok {
				if img == i.image && (o.unknown || o.outcome == first && o.cur == s.curID) {
					return []any{s}
				}
				return nil
			}
			want := OutcomeFailed
			if i.image != "" {
				want = OutcomeSuperseded
				if s.curID == "" || i.id >= s.curID {
					want = OutcomeCurrent
				}
			}
			next := s.with(i.id, i.image, want)
			if o.unknown {
				return []any{s, next} // it took effect, or it did not
			}
			if o.outcome == want && o.cur == next.curID {
				return []any{next}
			}
		}
		return nil
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(linInput), out.(linOutput)
		return fmt.Sprintf("%s(%s %s) -> %+v", i.op, i.id, i.image, o)
	},
}

// linHistory collects operations from concurrent clients.
type linHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	// failed counts calls that returned an error (kept as unknown for a
	// record, dropped for a request or a read, which change nothing a later
	// check depends on).
	failed atomic.Int64
}

func (h *linHistory) now() int64 { return int64(time.Since(h.start)) }

func (h *linHistory) add(client int, in linInput, call int64, out linOutput) {
	ret := h.now()
	if out.unknown {
		ret = math.MaxInt64 // may take effect any time after its call
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
}

// runClient runs one client's share: requests, records (some failed, some
// in reverse request order, some recorded again) and reads of current. A
// call that fails is tried again until it succeeds, as a builder's retry
// would; only errors of an unreachable cluster are allowed.
func runClient(t *testing.T, l *Ledger, client, builds int, h *linHistory) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(uint64(client), uint64(time.Now().UnixNano())))
	allowed := func(err error) {
		var u *UnreachableError
		if !errors.As(err, &u) {
			t.Errorf("client %d: %v (want success or an unreachable cluster)", client, err)
		}
		h.failed.Add(1)
	}
	request := func() string {
		for {
			call := h.now()
			p, err := l.Request(ctx, []string{"app"}, "")
			if err == nil {
				h.add(client, linInput{op: "request"}, call, linOutput{id: p.Builds[0].ID})
				return p.Builds[0].ID
			}
			allowed(err)
			if t.Failed() {
				return ""
			}
		}
	}
	record := func(id string) {
		image := ""
		var img *Image
		if rng.IntN(5) > 0 {
			image = digestImage("reg/app", client<<16|rng.IntN(1<<16))
			img = mustImage(t, image)
		}
		for again := range 1 + rng.IntN(2) { // sometimes recorded twice
			for {
				call := h.now()
				r, err := l.Record(ctx, id, img, "")
				in := linInput{op: "record", id: id, image: image}
				if err == nil {
					out := linOutput{outcome: r.Outcome}
					if r.Current != nil {
						out.cur = r.Current.ID
					}
					h.add(client, in, call, out)
					break
				}
				allowed(err)
				h.add(client, in, call, linOutput{unknown: true})
				if t.Failed() {
					return
				}
			}
			_ = again
		}
	}
	current := func() {
		call := h.now()
		b, ok, err := l.CurrentBuild(ctx, "app")
		if err != nil {
			allowed(err)
			return
		}
		out := linOutput{}
		if ok {
			out.id, out.image = b.ID, b.Image
		}
		h.add(client, linInput{op: "current"}, call, out)
	}
	for n := 0; n < builds && !t.Failed(); {
		if rng.IntN(3) == 0 && n+2 <= builds {
			// Two builds, the newer recorded first: the older is superseded.
			older, newer := request(), request()
			current()
			record(newer)
			record(older)
			n += 2
		} else {
			record(request())
			n++
		}
		current()
	}
}

// checkLinearizable runs clients against the ledgers open(i) returns and
// checks the history; during is run alongside them (a leader kill).
func checkLinearizable(t *testing.T, open func(i int) *Ledger, clients, builds int, during func()) {
	h := &linHistory{start: time.Now()}
	var wg sync.WaitGroup
	for i := range clients {
		l := open(i)
		wg.Go(func() { runClient(t, l, i, builds, h) })
	}
	if during != nil {
		during()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	res, info := porcupine.CheckOperationsVerbose(ledgerModel.ToModel(), h.ops, 2*time.Minute)
	t.Logf("porcupine: %s, %d operations checked (%d clients; %d calls failed and were retried)", res, len(h.ops), clients, h.failed.Load())
	if res != porcupine.Ok {
		file := filepath.Join(t.TempDir(), "history.html")
		if err := porcupine.VisualizePath(ledgerModel.ToModel(), info, file); err == nil {
			t.Logf("visualization: %s", file)
		}
		t.Fatalf("the history is not linearizable: %s", res)
	}
}

// linBuilds is the builds per client: 25, or 100 under MESHCTL_STRESS=1.
func linBuilds() int {
	if os.Getenv("MESHCTL_STRESS") != "" {
		return 100
	}
	return 25
}

func TestLinearizableFile(t *testing.T) {
	_, d := newTestLedger(t)
	checkLinearizable(t, func(int) *Ledger {
		l := New(d)
		l.LockTimeout = time.Minute
		return l
	}, 8, linBuilds(), nil)
}

func TestLinearizableEtcd(t *testing.T) {
	first := testEtcd(t)
	cfg := first.st.(*etcdStore).cfg
	checkLinearizable(t, func(int) *Ledger { return etcdClient(t, cfg) }, 8, linBuilds(), nil)
}

// TestLinearizableEtcdLeaderKilled kills the cluster's leader (SIGKILL) in
// the middle of the run and starts it again (5 times, 100 builds per client,
// under MESHCTL_STRESS=1): every call succeeds or fails
// as unreachable and succeeds when tried again, and the history, failed
// records included as unknown, is still linearizable.
func TestLinearizableEtcdLeaderKilled(t *testing.T) {
	first := testEtcd(t)
	cfg := first.st.(*etcdStore).cfg
	// A short budget: some calls fail while no leader answers, and are tried
	// again; the history keeps a failed record as one that may have happened.
	cfg.Timeout = 700 * time.Millisecond
	kills := 1
	if os.Getenv("MESHCTL_STRESS") != "" {
		kills = 5
	}
	checkLinearizable(t, func(int) *Ledger { return etcdClient(t, cfg) }, 8, linBuilds(), func() {
		for range kills {
			time.Sleep(300 * time.Millisecond)
			killLeader(t, cfg.Endpoints)
		}
	})
}

func etcdClient(t *testing.T, cfg EtcdConfig) *Ledger {
	l, err := OpenEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// killLeader SIGKILLs the member that leads, through scripts/etcd.sh (which
// signals only the pids it recorded), waits a little, and starts it again.
func killLeader(t *testing.T, endpoints []string) {
	t.Helper()
	dir := os.Getenv("MESHCTL_TEST_ETCD_DIR")
	if dir == "" {
		t.Fatal("MESHCTL_TEST_ETCD_DIR is not set: eval \"$(scripts/etcd.sh env)\"")
	}
	// One leader kill at a time across test packages: two at once would
	// leave the cluster without a quorum.
	unlock := killLock(t, dir)
	defer unlock()
	n := leaderMember(t, endpoints)
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "etcd.sh"))
	etcdScript(t, script, dir, endpoints, "kill-member", n)
	t.Logf("killed the leader, member %s", n)
	time.Sleep(1500 * time.Millisecond)
	etcdScript(t, script, dir, endpoints, "start-member", n)
}

// etcdScript runs scripts/etcd.sh on the test cluster: its home dir and
// first client port, whatever MESHCTL_ETCD_DIR and MESHCTL_ETCD_PORT say
// (unset, the script's defaults name another cluster).
func etcdScript(t *testing.T, script, dir string, endpoints []string, args ...string) {
	cmd := exec.Command(script, args...)
	cmd.Env = etcdtest.ScriptEnv(dir, endpoints)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

// leaderMember returns the scripts/etcd.sh member number (1-based endpoint
// order) of the leader.
func leaderMember(t *testing.T, endpoints []string) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return fmt.Sprint(i + 1)
		}
	}
	t.Fatal("no member says it leads")
	return ""
}

// TestLedgerModelRejects shows the checker can fail: histories that break
// the rule are found illegal.
func TestLedgerModelRejects(t *testing.T) {
	op := func(call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{Input: in, Call: call, Output: out, Return: ret}
	}
	const a, b = "b-01", "b-02"
	tests := map[string][]porcupine.Operation{
		"ids out of request order": {
			op(0, 1, linInput{op: "request"}, linOutput{id: b}),
			op(2, 3, linInput{op: "request"}, linOutput{id: a}),
		},
		"an older build recorded last becomes current": {
			op(0, 1, linInput{op: "request"}, linOutput{id: a}),
			op(2, 3, linInput{op: "request"}, linOutput{id: b}),
			op(4, 5, linInput{op: "record", id: b, image: "x:2"}, linOutput{outcome: OutcomeCurrent, cur: b}),
			op(6, 7, linInput{op: "record", id: a, image: "x:1"}, linOutput{outcome: OutcomeCurrent, cur: a}),
		},
		"a stale read of current": {
			op(0, 1, linInput{op: "request"}, linOutput{id: a}),
			op(2, 3, linInput{op: "record", id: a, image: "x:1"}, linOutput{outcome: OutcomeCurrent, cur: a}),
			op(4, 5, linInput{op: "current"}, linOutput{}),
		},
		"a record again with another outcome": {
			op(0, 1, linInput{op: "request"}, linOutput{id: a}),
			op(2, 3, linInput{op: "record", id: a, image: "x:1"}, linOutput{outcome: OutcomeCurrent, cur: a}),
			op(4, 5, linInput{op: "record", id: a, image: "x:1"}, linOutput{outcome: OutcomeSuperseded, cur: a}),
		},
	}
	for name, h := range tests {
		if porcupine.CheckOperations(ledgerModel.ToModel(), h) {
			t.Errorf("%s: found linearizable", name)
		}
	}
}

// killLock takes the test cluster's leader-kill lock (a flock in its home).
func killLock(t *testing.T, dir string) func() {
	f, err := os.OpenFile(filepath.Join(dir, "leader-kill.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	return func() { f.Close() }
}
