package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
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

// etcdHistory returns every write under prefix since revision 1, in order:
// it writes a marker and watches until it sees it, so that nothing written
// before the call is missed.
func etcdHistory(t testing.TB, cfg EtcdConfig) []etcdEvent {
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
	wch := cli.Watch(ctx, cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(1))
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
	h := etcdHistory(t, cfg)
	ledgerKey := cfg.Prefix + "/ledger/"
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
				creations = append(creations, created{e.rev, id})
				st.builds++
			case old.Module != d.Module || old.Plan != d.Plan || !old.RequestedAt.Equal(d.RequestedAt):
				fail(e, "build %s of %s (plan %s) rewritten as one of %s (plan %s): an id issued twice", id, old.Module, old.Plan, d.Module, d.Plan)
			case old.Record != nil && d.Record != nil && (old.Record.Image != d.Record.Image || old.Record.Outcome != d.Record.Outcome):
				fail(e, "build %s recorded again: %s %s, then %s %s", id, old.Record.Outcome, old.Record.Image, d.Record.Outcome, d.Record.Image)
			case d.Pruned != nil && old.Record != nil && d.Pruned.Result != old.Record.compact().Result:
				fail(e, "build %s pruned to another result", id)
			}
			if d.Record != nil && (old.Record == nil) {
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
