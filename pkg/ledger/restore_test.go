package ledger

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ownMember starts a one-member etcd of this test's own (the test cluster's
// binary, 127.0.0.1, data in dataDir) and returns what stops it, by its pid.
func ownMember(t *testing.T, dataDir, client, peer string) (stop func()) {
	t.Helper()
	bin := filepath.Join(os.Getenv("MESHCTL_TEST_ETCD_DIR"), "bin", "etcd")
	cmd := exec.Command(bin, "--name", "m", "--data-dir", dataDir,
		"--listen-client-urls", "http://127.0.0.1:"+client, "--advertise-client-urls", "http://127.0.0.1:"+client,
		"--listen-peer-urls", "http://127.0.0.1:"+peer, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peer,
		"--initial-cluster", "m=http://127.0.0.1:"+peer, "--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if !done {
			done = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestEtcdIdsAfterSnapshotRestore restores a snapshot into a new member
// (etcdutl snapshot restore) after more builds were requested: the restore
// loses those, and the ids issued after it are larger than every id issued
// before it, lost ones included, so a builder still holding a lost id can
// never record it as another build; the current build is the snapshot's.
func TestEtcdIdsAfterSnapshotRestore(t *testing.T) {
	testEtcd(t)
	etcdutl := filepath.Join(os.Getenv("MESHCTL_TEST_ETCD_DIR"), "bin", "etcdutl")
	if _, err := os.Stat(etcdutl); err != nil {
		t.Fatalf("etcdutl (scripts/etcd.sh build): %v", err)
	}
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	stop := ownMember(t, filepath.Join(dir, "data"), client, peer)
	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Timeout: 20 * time.Second}
	l := etcdClient(t, cfg)
	kept := request(t, l, "app").Builds[0].ID
	rec(t, l, kept, digestImage("reg/app", 1))

	// Snapshot, as etcdctl snapshot save does.
	cli, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cli.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(dir, "snap.db")
	f, err := os.Create(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, rc); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rc.Close()
	cli.Close()

	// Builds after the snapshot, which the restore loses.
	var lost []string
	for range 5 {
		lost = append(lost, request(t, l, "app").Builds[0].ID)
	}
	rec(t, l, lost[4], digestImage("reg/app", 5))
	stop()

	out, err := exec.Command(etcdutl, "snapshot", "restore", snap, "--data-dir", filepath.Join(dir, "restored"),
		"--name", "m", "--initial-cluster", "m=http://127.0.0.1:"+peer, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peer).CombinedOutput()
	if err != nil {
		t.Fatalf("etcdutl snapshot restore: %v\n%s", err, out)
	}
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
