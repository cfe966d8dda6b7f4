package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestWindowPublicationFollowsTheHold: a window that ends with its hold gone
// leaves the mesh at once; one whose close kept its hold (fail closed: a
// container it could not bring back) stays on the mesh, to lapse and show
// as lapsed, for the mesh view is never more optimistic than the host's own
// holds. No engine: the hold is written as such a close
// leaves it.
func TestWindowPublicationFollowsTheHold(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	ctx := context.Background()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	env := NewEnv(strings.NewReader(""), io.Discard, io.Discard)
	env.Global.Ledger = "etcd://" + eps + etcdtest.Prefix(t.Name())
	env.Global.LockTimeout = 20 * time.Second
	env.Global.HostName = "host-t"
	cfg, err := env.etcdLedger()
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	shown := func() []ledger.MeshWindow {
		t.Helper()
		ws, err := l.MeshWindows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}

	end := publishWindow(ctx, env, d, "store", "gc")
	if ws := shown(); len(ws) != 1 || ws[0].Host != "host-t" || ws[0].Lapsed {
		t.Fatalf("an open window on the mesh: %+v; want host-t's, live", ws)
	}
	end()
	if ws := shown(); len(ws) != 0 {
		t.Errorf("a window closed with its hold gone: %+v; want it off the mesh", ws)
	}

	end = publishWindow(ctx, env, d, "store", "gc")
	now := time.Now().UTC()
	kept := coord.Hold{ID: "w-kept", Module: "store", Step: "gc", PID: os.Getpid(), Containers: []string{"store.registry"},
		Restart: map[string]string{"store.registry": "always"}, OpenedAt: now, Deadline: now.Add(time.Hour)}
	lock, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = lock.Write(coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{kept}})
	lock.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if !holdKept(d, "store") {
		t.Fatal("holdKept does not see the hold this process kept")
	}
	end()
	ws := shown()
	if len(ws) != 1 || ws[0].Host != "host-t" || ws[0].Module != "store" {
		t.Errorf("a window whose close kept its hold: %+v; want it left on the mesh (to show as lapsed)", ws)
	}
	for _, w := range ws {
		if err := l.ForgetWindow(ctx, w); err != nil {
			t.Error(err)
		}
	}
}
