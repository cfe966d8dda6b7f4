package ledger

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdWindowPublishedUnderLease publishes a window (no engine needed):
// its key lives under a lease of WindowTTL, which the publisher renews, so
// that a window whose process dies drops off the mesh by itself; stop
// revokes it at once.
func TestEtcdWindowPublishedUnderLease(t *testing.T) {
	l := testEtcd(t)
	s := l.st.(*etcdStore)
	w := MeshWindow{Host: "h1", Module: "store", Step: "gc", PID: 4242, OpenedAt: time.Now().UTC()}
	stop, err := l.PublishWindow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, s.windowKey(w))
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the window's key: %v, %v", resp, err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if lease == clientv3.NoLease {
		t.Fatal("the window was published without a lease: it would stay on the mesh after its process died")
	}
	ttl, err := cli.TimeToLive(ctx, lease)
	if err != nil || ttl.TTL <= 0 || ttl.GrantedTTL != int64(WindowTTL/time.Second) {
		t.Fatalf("the window's lease: %+v, %v; want granted %s, alive", ttl, err, WindowTTL)
	}
	// Renewed: past a TTL, it is still there.
	time.Sleep(WindowTTL + 2*time.Second)
	if ws, err := l.MeshWindows(ctx); err != nil || len(ws) != 1 || ws[0] != w {
		t.Fatalf("after %s: %+v, %v; want the window, its lease renewed", WindowTTL+2*time.Second, ws, err)
	}
	stop()
	if ws, err := l.MeshWindows(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("after stop: %+v, %v; want none", ws, err)
	}
}
