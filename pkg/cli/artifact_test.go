package cli

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/ledger"
)

// TestArtifactReReadIsBounded: apply resolves artifact: before its state
// lock, then again under it. With the etcd cluster gone in between, the
// re-read fails within seconds, not --lock-timeout, so that the lock (and
// every window of the host waiting for it) is not held for minutes.
func TestArtifactReReadIsBounded(t *testing.T) {
	etcdtest.Endpoints(t) // skips (or fails under CI) without the test cluster
	dir := t.TempDir()
	client, peer := etcdtest.FreePort(t), etcdtest.FreePort(t)
	stop := etcdtest.Member(t, filepath.Join(dir, "data"), client, peer)
	url := "etcd://127.0.0.1:" + client + "/p"
	cfg, err := ledger.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	var p ledger.Plan
	for deadline := time.Now().Add(10 * time.Second); ; {
		if p, err = l.Request(ctx, []string{"app"}, ""); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	img, _ := ledger.ParseImage("reg.example/app@sha256:" + "1111111111111111111111111111111111111111111111111111111111111111")
	if _, err := l.Record(ctx, p.Builds[0].ID, &img, ""); err != nil {
		t.Fatal(err)
	}

	env := &Env{Stdout: io.Discard, Stderr: io.Discard, Global: Global{Ledger: url, LockTimeout: time.Minute}}
	resolve := artifactResolver(ctx, env, nil)
	if image, _, ok, err := resolve("app"); err != nil || !ok || image != img.Ref {
		t.Fatalf("first resolution: %q, %v, %v", image, ok, err)
	}
	stop()
	start := time.Now()
	if _, _, _, err := resolve("app"); err == nil {
		t.Fatal("re-read with the cluster gone succeeded")
	}
	// Half --lock-timeout: far from both, so that a loaded machine cannot
	// fail it (a bound that is not a speed check).
	if d := time.Since(start); d > env.Global.LockTimeout/2 {
		t.Errorf("the re-read gave up after %s; want about %s, not --lock-timeout (%s)", d, ledger.RecheckTimeout, env.Global.LockTimeout)
	}
}
