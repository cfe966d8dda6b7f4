package ledger

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The history checker reads etcd's own write history of a ledger (a watch
// from revision 1 of its prefix) and checks what every write must keep,
// whatever the clients saw: the last id never moves back, ids are created
// in increasing order and once each, a build's request is never rewritten
// and its record never changes, a module's head never moves back to an
// older build and always holds its own build's record.

// etcdEvent is one write of the history: a put (value set) or a delete.
type etcdEvent struct {
	rev, createRev int64
	key            string
	value          []byte // nil: deleted
}

// etcdHistory returns every write under prefix since revision from, in order:
// it writes a marker and watches until it sees it, so that nothing written
// before the call is missed.
func etcdHistory(t testing.TB, cfg EtcdConfig, from int64) []etcdEvent {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		Username: cfg.Username, Password: cfg.Password})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	marker := cfg.Prefix + "/history-end"
	wch := cli.Watch(ctx, cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(from))
	if _, err := cli.Put(ctx, marker, "x"); err != nil {
		t.Fatal(err)
	}
	var out []etcdEvent
	for resp := range wch {
		if err := resp.Err(); err != nil {
			t.Fatalf("watch of %s from revision 1: %v", cfg.Prefix, err)
		}
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if k == marker {
				return out
			}
			e := etcdEvent{rev: ev.Kv.ModRevision, createRev: ev.Kv.CreateRevision, key: k}
			if ev.Type == mvccpb.PUT {
				e.value = ev.Kv.Value
				if e.value == nil {
					e.value = []byte{}
				}
			}
			out = append(out, e)
		}
	}
	t.Fatalf("watch of %s ended before its marker: %v", cfg.Prefix, ctx.Err())
	return nil
}

// historyStats counts what a history held, for the test's log.
type historyStats struct {
	events, issued, builds, records, heads int
}

// checkHistory checks the history of the ledger under cfg.Prefix; images,
// when not nil, is the image each client recorded per build id ("" for
// failed), which the build's record and its module's head must carry.
func checkHistory(t testing.TB, cfg EtcdConfig, images map[string]string) historyStats {
	t.Helper()
	return checkEvents(t, cfg.Prefix, etcdHistory(t, cfg, 1), nil, images)
}

// checkEvents checks the history h of the ledger under prefix. lost are
// writes a snapshot restore lost (after the snapshot, before the restore):
// no id they created may be created again.
func checkEvents(t testing.TB, prefix string, h, lost []etcdEvent, images map[string]string) historyStats {
	t.Helper()
	ledgerKey := prefix + "/ledger/"
	lostIDs := map[string]bool{}
	for _, e := range lost {
		if rel, ok := strings.CutPrefix(e.key, ledgerKey+"b/"); ok && e.value != nil && e.createRev == e.rev {
			lostIDs[rel] = true
		}
	}
	var st historyStats
	st.events = len(h)
	var last string
	type created struct {
		rev int64
		id  string
	}
	var creations []created
	builds := map[string]buildDoc{}
	heads := map[string]string{}
	fail := func(e etcdEvent, format string, args ...any) {
		t.Errorf("revision %d, %s: %s", e.rev, e.key, fmt.Sprintf(format, args...))
	}
	for _, e := range h {
		rel, ok := strings.CutPrefix(e.key, ledgerKey)
		if !ok {
			continue
		}
		kind, name, _ := strings.Cut(rel, "/")
		switch {
		case kind == "last" && e.value != nil:
			v := string(e.value)
			if v <= last {
				fail(e, "the last id moved back from %s to %s", last, v)
			}
			last = v
			st.issued++
		case kind == "b" && e.value != nil:
			var d buildDoc
			if err := json.Unmarshal(e.value, &d); err != nil {
				fail(e, "%v", err)
				continue
			}
			id := name
			old, seen := builds[id]
			switch {
			case !seen:
				if e.createRev != e.rev {
					fail(e, "build %s written first as an update", id)
				}
				if lostIDs[id] {
					fail(e, "build %s was issued before the restore and lost with it: issued again", id)
				}
				creations = append(creations, created{e.rev, id})
				st.builds++
			case old.Module != d.Module || old.Plan != d.Plan || !old.RequestedAt.Equal(d.RequestedAt):
				fail(e, "build %s of %s (plan %s) rewritten as one of %s (plan %s): an id issued twice", id, old.Module, old.Plan, d.Module, d.Plan)
			case old.Record != nil && d.Record != nil && (old.Record.Image != d.Record.Image || old.Record.Outcome != d.Record.Outcome):
				fail(e, "build %s recorded again: %s %s, then %s %s", id, old.Record.Outcome, old.Record.Image, d.Record.Outcome, d.Record.Image)
			case d.Pruned != nil && old.Record != nil && d.Pruned.Result != old.Record.compact().Result:
				fail(e, "build %s pruned to another result", id)
			}
			if d.Record != nil && old.Record == nil {
				// Outcomes in request order: the head before this record (its
				// own head write comes after it, in the same transaction).
				cur := heads[d.Module]
				switch o := d.Record.Outcome; {
				case o == OutcomeFailed && d.Record.Image != "",
					o == OutcomeCurrent && (d.Record.Image == "" || id < cur),
					o == OutcomeSuperseded && (d.Record.Image == "" || id >= cur):
					fail(e, "build %s recorded %s (image %q) with %s current: not the rule's outcome", id, o, d.Record.Image, cur)
				}
				st.records++
				if want, ok := images[id]; images != nil && ok && d.Record.Image != want {
					fail(e, "build %s recorded with %q, its builder recorded %q", id, d.Record.Image, want)
				}
			}
			if d.Record == nil && d.Pruned == nil && old.Record != nil {
				fail(e, "build %s was recorded and is pending again", id)
			}
			builds[id] = d
		case kind == "b":
			fail(e, "build deleted")
		case kind == "head" && e.value != nil:
			var r record
			if err := json.Unmarshal(e.value, &r); err != nil {
				fail(e, "%v", err)
				continue
			}
			if r.ID < heads[name] {
				fail(e, "the head of %s moved back from %s to %s", name, heads[name], r.ID)
			}
			heads[name] = r.ID
			st.heads++
			b := builds[r.ID]
			switch {
			case b.Module != name:
				fail(e, "the head of %s is build %s of module %q", name, r.ID, b.Module)
			case b.Record == nil || b.Record.Image != r.Image:
				fail(e, "the head of %s holds %s with %q, not its own record", name, r.ID, r.Image)
			}
		}
	}
	// Ids are issued in the order of the transactions that created them.
	sort.SliceStable(creations, func(i, j int) bool { return creations[i].rev < creations[j].rev })
	for i := 1; i < len(creations); i++ {
		a, b := creations[i-1], creations[i]
		if a.rev < b.rev && a.id >= b.id {
			t.Errorf("build %s created at revision %d, after %s at revision %d: ids out of request order", b.id, b.rev, a.id, a.rev)
		}
	}
	return st
}

// headRead is what one read of a module's current build returned; after
// is the cluster's revision before the read began.
type headRead struct {
	module, id, image string
	after             int64
}

// readsFollowHistory checks one reader's reads, made one after another,
// against the history h they were made in: each returned a head that h
// wrote, with its image, no older than the head h held at the revision
// before the read began (reads are linearizable), and no read returned an
// older build than the one before it (heads never move back).
func readsFollowHistory(t *testing.T, prefix string, h []etcdEvent, reads []headRead) {
	t.Helper()
	type value struct{ module, id, image string }
	type head struct {
		rev int64
		id  string
	}
	written := map[value]bool{}
	heads := map[string][]head{} // by module, in revision order
	for _, e := range h {
		m, ok := strings.CutPrefix(e.key, prefix+"/ledger/head/")
		if !ok || e.value == nil {
			continue
		}
		var r record
		if err := json.Unmarshal(e.value, &r); err != nil {
			t.Fatalf("revision %d, %s: %v", e.rev, e.key, err)
		}
		written[value{m, r.ID, r.Image}] = true
		heads[m] = append(heads[m], head{e.rev, r.ID})
	}
	last := map[string]string{}
	for i, r := range reads {
		if !written[value{r.module, r.id, r.image}] {
			t.Errorf("read %d: current %s is %s (%s), a head etcd never wrote", i, r.module, r.id, r.image)
		}
		hs := heads[r.module]
		if n := sort.Search(len(hs), func(j int) bool { return hs[j].rev > r.after }); n > 0 && r.id < hs[n-1].id {
			t.Errorf("read %d: current %s is %s, older than %s, the head at revision %d, before the read began: a stale read", i, r.module, r.id, hs[n-1].id, r.after)
		}
		if r.id < last[r.module] {
			t.Errorf("read %d: current %s went back from %s to %s", i, r.module, last[r.module], r.id)
		}
		last[r.module] = r.id
	}
}

// skewOf is host i's clock skew: one two minutes ahead, one right, one a
// minute behind, one 30 s ahead.
func skewOf(i int) time.Duration {
	return []time.Duration{2 * time.Minute, 0, -time.Minute, 30 * time.Second}[i%4]
}

func skewedClock(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// TestEtcdConcurrentRequestsSkewedClocks runs the linearizability check
// with hosts whose clocks disagree by up to three minutes, then checks
// etcd's own history: no id issued twice, the last id never back, ids in
// the order of their transactions, each head its own build. Without the
// compare on "last", two hosts that read the same last id both issue
// after it, and the one whose clock is behind moves it back.
func TestEtcdConcurrentRequestsSkewedClocks(t *testing.T) {
	first := testEtcd(t)
	cfg := first.st.(*etcdStore).cfg
	// The history is checked even when porcupine fails (a Fatal).
	defer func() {
		st := checkHistory(t, cfg, nil)
		t.Logf("history: %+v", st)
		if st.builds == 0 {
			t.Error("no build in the history: the check proves nothing")
		}
	}()
	checkLinearizable(t, func(i int) *Ledger {
		l := etcdClient(t, cfg)
		l.Now = skewedClock(skewOf(i))
		return l
	}, 8, linBuilds(), nil)
}

// etcdBuilder is a child process of TestEtcdHostileHistory: a CI runner
// with a skewed clock that requests builds of web and api and records each
// with an image of its own, for ever. It prints "ID IMAGE" (or "ID failed")
// before each record, so that the parent knows what every id was to carry
// even when it kills the child mid-record; errors of a cluster that is
// down or restored are retried, as a pipeline would.
func etcdBuilder() error {
	skew, _ := time.ParseDuration(os.Getenv("MESHCTL_LEDGER_TEST_SKEW"))
	l, err := OpenEtcd(EtcdConfig{Endpoints: strings.Split(os.Getenv("MESHCTL_LEDGER_TEST_ETCD"), ","),
		Prefix: os.Getenv("MESHCTL_LEDGER_TEST_PREFIX"), Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	l.Now = skewedClock(skew)
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(os.Stdout, "ready")
	for n := 0; ; n++ {
		modules := [][]string{{"web"}, {"api"}, {"web", "api"}}[n%3]
		p, err := l.Request(ctx, modules, "")
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		for i, b := range p.Builds {
			var img *Image
			if (n+i)%7 != 3 {
				parsed, _ := ParseImage(digestImage("reg/"+b.Module, os.Getpid()<<12|n<<1|i))
				img = &parsed
				fmt.Fprintln(out, b.ID, parsed.Ref)
			} else {
				fmt.Fprintln(out, b.ID, "failed")
			}
			out.Flush()
			for {
				_, err := l.Record(ctx, b.ID, img, "")
				var c *ConflictError
				if errors.As(err, &c) {
					fmt.Fprintln(out, "CONFLICT", err)
					out.Flush()
				}
				if err == nil || exitCodeOf(err) != 1 {
					break // done, or unknown: lost with a restore
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// TestEtcdHostileHistory runs builders as processes with skewed clocks
// (two minutes ahead to a minute behind) against a one-member cluster of
// its own, SIGKILLs them at random instants (mid-record), SIGKILLs the
// member (the leader) and starts it again on its data, stops the builder
// ahead (so the last id is ahead of every clock left), takes a snapshot,
// SIGKILLs the member and restores the snapshot (with
// --bump-revision --mark-compacted) while they run, and then checks etcd's
// own write history: before the restore from revision 1, after it from the
// restore's revision. No id is issued twice (ids lost with the restore
// included), last and each head never move back, each build's request is
// never rewritten and its record never changes, and each record carries
// the image its builder recorded for that id. A reader reads web's and
// api's current builds throughout: each read is a head etcd wrote, none
// older than the head at the revision before it began, none going back
// (readsFollowHistory). A few seconds by default;
// about a minute and 14 kills of builders with MESHCTL_LONG=1, which logs
// the counts.
func TestEtcdHostileHistory(t *testing.T) {
	testEtcd(t)
	phase, kills := time.Second, 2
	if os.Getenv("MESHCTL_LONG") != "" {
		phase, kills = 15*time.Second, 12
	}
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	stopMember := ownMember(t, filepath.Join(dir, "data"), client, peer)
	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Prefix: "/hostile", Timeout: 20 * time.Second}

	var mu sync.Mutex
	images := map[string]string{}
	var lines, killed int
	var wg sync.WaitGroup
	start := func(skew time.Duration) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childModeVar+"=etcd-builder", "MESHCTL_LEDGER_TEST_SKEW="+skew.String(),
			"MESHCTL_LEDGER_TEST_ETCD="+cfg.Endpoints[0], "MESHCTL_LEDGER_TEST_PREFIX="+cfg.Prefix)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		sc.Scan() // ready
		wg.Go(func() {
			for sc.Scan() {
				id, image, _ := strings.Cut(sc.Text(), " ")
				if image == "failed" {
					image = ""
				}
				mu.Lock()
				lines++
				if id == "CONFLICT" {
					t.Errorf("a builder's record conflicted: %s", image)
				} else if old, ok := images[id]; ok && old != image {
					t.Errorf("id %s was handed to two builds (%s, then %s)", id, old, image)
				}
				images[id] = image
				mu.Unlock()
			}
		})
		return cmd
	}
	kill := func(cmd *exec.Cmd) {
		_ = cmd.Process.Kill() // our own child, by its pid
		_ = cmd.Wait()
	}
	var builders []*exec.Cmd
	for i := range 4 {
		builders = append(builders, start(skewOf(i)))
	}
	defer func() {
		for _, b := range builders {
			kill(b)
		}
	}()
	// run lets the builders work for d, killing one at a random instant k
	// times (host 0, ahead, is never restarted once it has stopped).
	run := func(d time.Duration, k int) {
		for range k {
			time.Sleep(time.Duration(rand.Int64N(int64(d) / int64(k))))
			i := 1 + rand.IntN(len(builders)-1)
			kill(builders[i])
			builders[i] = start(skewOf(i))
			killed++
		}
		time.Sleep(d / time.Duration(k+1))
	}

	// A reader throughout, as a host's apply reads artifact:; its reads
	// are checked against etcd's history at the end (readsFollowHistory).
	// epoch is 0 before the restore, 1 after it, -1 while it is made: a
	// read called in one epoch and answered in another is not kept.
	var epoch atomic.Int32
	var reads [2][]headRead
	reader := etcdClient(t, EtcdConfig{Endpoints: cfg.Endpoints, Prefix: cfg.Prefix, Timeout: 2 * time.Second})
	readerKV, err := reader.st.(*etcdStore).client()
	if err != nil {
		t.Fatal(err)
	}
	stopReading, readerDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(readerDone)
		for n := 0; ; n++ {
			select {
			case <-stopReading:
				return
			default:
			}
			m := []string{"web", "api"}[n%2]
			e := epoch.Load()
			// The cluster's revision before the read: the read must see
			// every head written up to it.
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			rev, err := readerKV.Get(rctx, cfg.Prefix+"/reader")
			cancel()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			b, ok, err := reader.CurrentBuild(context.Background(), m)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
			}
			if err == nil && ok && e >= 0 && epoch.Load() == e {
				reads[e] = append(reads[e], headRead{m, b.ID, b.Image, rev.Header.Revision})
			}
		}
	}()

	run(2*phase, kills/2)
	// The leader (the one member) SIGKILLed mid-call and started again on
	// its data: the calls in flight lose their answers and are retried.
	stopMember()
	stopMember = ownMember(t, filepath.Join(dir, "data"), client, peer)
	run(phase, 1)
	// Host 0, two minutes ahead, stops: the last id is ahead of every other
	// host's clock, as after a restore under skewed clocks.
	kill(builders[0])
	snap := saveSnapshot(t, cfg.Endpoints[0], dir)
	out, err := exec.Command(filepath.Join(os.Getenv("MESHCTL_TEST_ETCD_DIR"), "bin", "etcdutl"), "snapshot", "status", snap, "-w", "json").Output()
	if err != nil {
		t.Fatalf("etcdutl snapshot status: %v", err)
	}
	var status struct{ Revision int64 }
	if err := json.Unmarshal(out, &status); err != nil || status.Revision == 0 {
		t.Fatalf("snapshot status %s: %v", out, err)
	}
	run(phase, 1)   // lost with the restore
	epoch.Store(-1) // the reads before this are in the history read next
	before := etcdHistory(t, cfg, 1)
	stopMember() // SIGKILL: every builder is mid-call
	const bump = 1000000
	restoreSnapshot(t, snap, filepath.Join(dir, "restored"), peer, bump)
	ownMember(t, filepath.Join(dir, "restored"), client, peer)
	epoch.Store(1)
	run(2*phase, max(kills/2, 1))
	for _, b := range builders {
		kill(b)
	}
	builders = nil
	wg.Wait()
	close(stopReading)
	<-readerDone
	after := etcdHistory(t, cfg, status.Revision+bump+1)

	var kept, lost []etcdEvent
	for _, e := range before {
		if e.rev <= status.Revision {
			kept = append(kept, e)
		} else {
			lost = append(lost, e)
		}
	}
	st := checkEvents(t, cfg.Prefix, append(kept, after...), lost, images)
	readsFollowHistory(t, cfg.Prefix, before, reads[0])
	readsFollowHistory(t, cfg.Prefix, append(kept, after...), reads[1])
	t.Logf("reader: %d reads before the restore, %d after it", len(reads[0]), len(reads[1]))
	t.Logf("history: %d writes kept and %d lost with the restore (snapshot at revision %d); %d ids issued (last written %d times), %d builds, %d records, %d head moves; builders printed %d ids, were SIGKILLed %d times",
		len(kept)+len(after), len(lost), status.Revision, len(images), st.issued, st.builds, st.records, st.heads, lines, killed)
	if st.builds == 0 || len(lost) == 0 || len(after) == 0 {
		t.Errorf("builds %d, writes lost %d, after the restore %d: the run proves little", st.builds, len(lost), len(after))
	}
}
