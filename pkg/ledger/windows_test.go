package ledger

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
	// Renewed (every third of its TTL): half a TTL on, more than half is left.
	time.Sleep(WindowTTL / 2)
	if ttl, err := cli.TimeToLive(ctx, lease); err != nil || ttl.TTL <= int64(WindowTTL/time.Second)/2 {
		t.Fatalf("after %s: lease %+v, %v; want it renewed", WindowTTL/2, ttl, err)
	}
	if ws, err := l.MeshWindows(ctx); err != nil || len(ws) != 1 || ws[0] != w {
		t.Fatalf("%+v, %v; want the window", ws, err)
	}
	stop()
	if ws, err := l.MeshWindows(context.Background()); err != nil || len(ws) != 0 {
		t.Fatalf("after stop: %+v, %v; want none", ws, err)
	}
}

// windowLease returns the lease the window's key lives under (0: none or
// no key).
func windowLease(t *testing.T, s *etcdStore, w MeshWindow) clientv3.LeaseID {
	t.Helper()
	cli, err := s.client()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, s.windowKey(w))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return clientv3.NoLease
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// TestEtcdWindowRepublishedAfterLapse makes a window's lease lapse while
// the window lives (revoked, as the cluster does once renewals stopped
// for WindowTTL): meanwhile the mesh shows the window as lapsed, never
// not at all, and the window is published again on a new lease, with a
// warning.
func TestEtcdWindowRepublishedAfterLapse(t *testing.T) {
	l := testEtcd(t)
	s := l.st.(*etcdStore)
	var mu sync.Mutex
	var warnings []string
	l.Warnf = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, fmt.Sprintf(format, args...))
	}
	w := MeshWindow{Host: "h1", Module: "store", Step: "gc", PID: 4242, OpenedAt: time.Now().UTC()}
	stop, err := l.PublishWindow(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	first := windowLease(t, s, w)
	cli, _ := s.client()
	if _, err := cli.Revoke(ctx, first); err != nil {
		t.Fatal(err)
	}
	if ws, err := l.MeshWindows(ctx); err != nil || len(ws) != 1 || !ws[0].Lapsed {
		t.Errorf("a window whose lease lapsed: %+v, %v; want it shown, lapsed", ws, err)
	}
	said := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(warnings, "")
	}
	// The new lease is in etcd a moment before the process says so.
	deadline := time.Now().Add(2 * WindowTTL)
	for {
		lease := windowLease(t, s, w)
		if lease != clientv3.NoLease && lease != first && strings.Contains(said(), "published on the mesh again") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, the window is not published again on a new lease (lease %x, first %x), or not said: %q", 2*WindowTTL, lease, first, said())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ws, err := l.MeshWindows(ctx); err != nil || len(ws) != 1 || ws[0].Lapsed {
		t.Errorf("published again: %+v, %v; want it shown, not lapsed", ws, err)
	}
	if got := said(); !strings.Contains(got, "lapsed") {
		t.Errorf("warnings: %q; want the lapse and the new publication", got)
	}
}

// TestEtcdWindowKilledShowsLapsed: a window killed (no close) stops
// renewing its lease; once it lapses the window shows as lapsed, since its
// step may still run and its host still holds the module, until its host
// forgets it.
func TestEtcdWindowKilledShowsLapsed(t *testing.T) {
	l := testEtcd(t)
	s := l.st.(*etcdStore)
	w := MeshWindow{Host: "h1", Module: "store", Step: "gc", PID: 4243, OpenedAt: time.Now().UTC()}
	p, err := l.Publish(ctx, w)
	if err != nil {
		t.Fatal(err)
	}
	p.Leave()
	cli, _ := s.client()
	if _, err := cli.Revoke(ctx, windowLease(t, s, w)); err != nil { // lapsed, without waiting WindowTTL
		t.Fatal(err)
	}
	lapsed := w
	lapsed.Lapsed = true
	if ws, err := l.MeshWindows(ctx); err != nil || len(ws) != 1 || ws[0] != lapsed {
		t.Fatalf("a killed window past its lease: %+v, %v; want it shown, lapsed", ws, err)
	}
	if err := l.ForgetWindow(ctx, w); err != nil {
		t.Fatal(err)
	}
	if ws, err := l.MeshWindows(ctx); err != nil || len(ws) != 0 {
		t.Fatalf("forgotten: %+v, %v; want none", ws, err)
	}
}
