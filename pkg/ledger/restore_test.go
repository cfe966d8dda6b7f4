package ledger

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/meshctl/meshctl/internal/etcdtest"
)

// ownMember starts a one-member etcd of this test's own (etcdtest.Member).
func ownMember(t *testing.T, dataDir, client, peer string) (stop func()) {
	t.Helper()
	return etcdtest.Member(t, dataDir, client, peer)
}

// TestEtcdIdsAfterSnapshotRestore restores a snapshot into a new member
// (etcdutl snapshot restore) after more builds were requested: the restore
// loses those, and the ids issued after it are larger than every id issued
// before it, lost ones included, so a builder still holding a lost id can
// never record it as another build; the current build is the snapshot's.
func TestEtcdIdsAfterSnapshotRestore(t *testing.T) {
	testEtcd(t)
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	stop := ownMember(t, filepath.Join(dir, "data"), client, peer)
	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Timeout: 20 * time.Second}
	l := etcdClient(t, cfg)
	kept := request(t, l, "app").Builds[0].ID
	rec(t, l, kept, digestImage("reg/app", 1))

	snap := saveSnapshot(t, cfg.Endpoints[0], dir)

	// Builds after the snapshot, which the restore loses.
	var lost []string
	for range 5 {
		lost = append(lost, request(t, l, "app").Builds[0].ID)
	}
	rec(t, l, lost[4], digestImage("reg/app", 5))
	stop()

	restoreSnapshot(t, snap, filepath.Join(dir, "restored"), peer, 0)
	ownMember(t, filepath.Join(dir, "restored"), client, peer)
	l2 := etcdClient(t, cfg)
	if cur, err := l2.Current("app"); err != nil || cur.ID != kept {
		t.Fatalf("current after restore: %+v, %v; want the snapshot's %s", cur, err, kept)
	}
	next := request(t, l2, "app").Builds[0].ID
	for _, id := range append(lost, kept) {
		if next <= id {
			t.Errorf("id %s issued after the restore is not after %s, issued before it", next, id)
		}
	}
	if _, err := l2.Record(ctx, lost[0], mustImage(t, digestImage("reg/app", 9)), ""); exitCodeOf(err) != 2 || !strings.Contains(err.Error(), "never issued") {
		t.Errorf("a build id the restore lost, recorded: %v; want exit 2, unknown", err)
	}
}

// saveSnapshot saves a snapshot of the member at endpoint into dir, as
// etcdctl snapshot save does, and returns its path.
func saveSnapshot(t *testing.T, endpoint, dir string) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	rc, err := cli.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	snap := filepath.Join(dir, "snap.db")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	return snap
}

// restoreSnapshot restores snap into the data directory data of a
// one-member cluster (etcdutl snapshot restore), bumping the revision by
// bump (with --mark-compacted) when it is positive.
func restoreSnapshot(t *testing.T, snap, data, peer string, bump int) {
	t.Helper()
	etcdutl := filepath.Join(os.Getenv("MESHCTL_TEST_ETCD_DIR"), "bin", "etcdutl")
	if _, err := os.Stat(etcdutl); err != nil {
		t.Fatalf("etcdutl (scripts/etcd.sh build): %v", err)
	}
	args := []string{"snapshot", "restore", snap, "--data-dir", data,
		"--name", "m", "--initial-cluster", "m=http://127.0.0.1:" + peer, "--initial-advertise-peer-urls", "http://127.0.0.1:" + peer}
	if bump > 0 {
		args = append(args, "--bump-revision", strconv.Itoa(bump), "--mark-compacted")
	}
	if out, err := exec.Command(etcdutl, args...).CombinedOutput(); err != nil {
		t.Fatalf("etcdutl snapshot restore: %v\n%s", err, out)
	}
}

// hostClock is a host's clock, off by skew, moving on a millisecond at each
// reading.
func hostClock(skew time.Duration) func() time.Time {
	var mu sync.Mutex
	now := time.Now().Add(skew)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
}

// TestEtcdIdsAfterRestoreSkewedClocks replays a restore under skewed clocks: host A's
// clock runs two minutes ahead, so the ledger's last id is ahead of host
// B's clock; a snapshot is taken; B requests web and a builder keeps its
// id; the cluster is restored from the snapshot as CONTRACT §7 says (with
// --bump-revision); B requests api. Its id must not be web's lost one,
// and web's lost id, recorded with web's image, is unknown (exit 2): api's
// current build can never be web's image.
func TestEtcdIdsAfterRestoreSkewedClocks(t *testing.T) {
	testEtcd(t)
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	stop := ownMember(t, filepath.Join(dir, "data"), client, peer)
	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Timeout: 20 * time.Second}
	hostA, hostB := etcdClient(t, cfg), etcdClient(t, cfg)
	hostA.Now, hostB.Now = hostClock(2*time.Minute), hostClock(0)
	for range 3 {
		request(t, hostA, "web", "api")
		request(t, hostB, "web", "api")
	}
	snap := saveSnapshot(t, cfg.Endpoints[0], dir)

	var lost []string
	for range 3 {
		lost = append(lost, request(t, hostB, "web").Builds[0].ID)
	}
	stop()
	hostA.Close()
	hostB.Close()

	restoreSnapshot(t, snap, filepath.Join(dir, "restored"), peer, 1000000)
	ownMember(t, filepath.Join(dir, "restored"), client, peer)
	hostB = etcdClient(t, cfg)
	hostB.Now = hostClock(0)
	var after []string
	for range 3 {
		after = append(after, request(t, hostB, "api").Builds[0].ID)
	}
	for _, id := range after {
		if slices.Contains(lost, id) {
			t.Errorf("id %s, issued to api after the restore, was issued to web before it and lost: %v", id, lost)
		}
	}
	for _, id := range lost {
		if _, err := hostB.Record(ctx, id, mustImage(t, digestImage("reg/web", 1)), ""); exitCodeOf(err) != 2 {
			t.Errorf("web's lost build %s recorded after the restore: %v; want exit 2, unknown", id, err)
		}
	}
	if _, err := hostB.Current("api"); exitCodeOf(err) != 2 {
		t.Errorf("api's current build after web's lost ids were recorded: %v; want none (exit 2)", err)
	}
}

// TestEtcdTxnAcrossRestoreNeverCommits: a request that read before a
// snapshot restore (--bump-revision --mark-compacted) and commits after it
// is refused, although its compares hold against the restored keys: it
// read at the revision at which another request, lost with the restore,
// issued its ids, and would issue the same ones (docs/model/ledger-etcd.pml,
// BROKEN_NO_COMPACT_CHECK).
func TestEtcdTxnAcrossRestoreNeverCommits(t *testing.T) {
	testEtcd(t)
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	stop := ownMember(t, filepath.Join(dir, "data"), client, peer)
	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Timeout: 20 * time.Second}
	l := etcdClient(t, cfg)
	request(t, l, "web")
	snap := saveSnapshot(t, cfg.Endpoints[0], dir)

	// A request reads (at the snapshot's revision) and issues its id…
	s := l.st.(*etcdStore)
	cli, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	tx := &etcdTx{s: s, kv: cli, ctx: context.Background(), seen: map[string]int64{}, vals: map[string][]byte{}, writes: map[string][]byte{}}
	if err := tx.checkImporting(); err != nil {
		t.Fatal(err)
	}
	ids, err := tx.issue(1, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tx.addPending(buildPrefix+ids[0], pendingRec{Module: "api", RequestedAt: time.Now()})
	// …another, at the same revision, commits first; the restore loses it.
	other := etcdClient(t, cfg)
	request(t, other, "web")
	stop()
	restoreSnapshot(t, snap, filepath.Join(dir, "restored"), peer, 1000000)
	ownMember(t, filepath.Join(dir, "restored"), client, peer)

	deadline := time.Now().Add(15 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		tx.ctx = cctx
		ok, err := tx.commit()
		cancel()
		if err == nil && ok {
			t.Fatalf("a transaction that read before the restore committed after it, issuing %s", ids[0])
		}
		if err == nil || strings.Contains(err.Error(), "compacted") {
			break // refused: read again, it issues after the bumped revision
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restored member did not answer: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if next := request(t, l, "api").Builds[0].ID; next == buildPrefix+ids[0] {
		t.Errorf("the request run again issued the same id %s", next)
	}
}

// TestEtcdCurrentAgainIsBounded: a re-read of a module's current build
// under a lock (apply's second resolution) gives up after one attempt when
// the cluster stopped answering, not after the ledger's whole Timeout.
func TestEtcdCurrentAgainIsBounded(t *testing.T) {
	testEtcd(t)
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	stop := ownMember(t, filepath.Join(dir, "data"), client, peer)
	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Timeout: time.Minute}
	l := etcdClient(t, cfg)
	rec(t, l, request(t, l, "app").Builds[0].ID, digestImage("reg/app", 1))
	if _, ok, err := l.CurrentBuild(ctx, "app"); err != nil || !ok {
		t.Fatalf("current: %v, %v", ok, err)
	}
	stop()
	start := time.Now()
	_, _, err := l.CurrentBuildAgain(ctx, "app")
	if exitCodeOf(err) != 1 {
		t.Errorf("re-read with the cluster down: %v; want exit 1, unreachable", err)
	}
	// Half the ledger's Timeout: far from both, so that a loaded machine
	// cannot fail it (a bound that is not a speed check).
	if d := time.Since(start); d > cfg.Timeout/2 {
		t.Errorf("re-read gave up after %s; want about %s, not the ledger's %s", d, RecheckTimeout, cfg.Timeout)
	}
}
