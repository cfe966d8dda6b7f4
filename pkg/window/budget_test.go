package window

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

const budgetYAML = `
modules:
  bw:
    max-unavailable: 1
    containers:
      web:
        image: ` + enginetest.Image + `
    steps:
      gc:
        while-stopped: [web]
        exec: ["true"]
      ro:
        while-changed: {web: {env: {RO: "1"}}}
        exec: ["true"]
`

// TestWindowStoppedHoldTakesASlot: a window that holds containers stopped
// in a module with max-unavailable takes the host's slot before it stops
// them. Another host cannot take the slot while it is open. The close
// gives it back once the container runs again. Without an etcd ledger the
// window is refused, nothing held.
func TestWindowStoppedHoldTakesASlot(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	l, err := ledger.OpenEtcd(ledger.EtcdConfig{Endpoints: strings.Split(eps, ","), Prefix: etcdtest.Prefix(t.Name()), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	d := openTemp(t)
	eng := enginetest.NewFake(enginetest.Image)
	applyFresh(t, d, eng, decode(t, budgetYAML))

	if _, err := Run(ctx, d, eng, Options{Module: "bw", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err == nil ||
		!strings.Contains(err.Error(), "needs an etcd ledger") {
		t.Fatalf("a window without etcd: %v; want it refused", err)
	}
	if c, _ := eng.Get("bw.web"); !c.Running {
		t.Fatal("a refused window stopped bw.web")
	}
	// A changed hold takes no slot: it needs no etcd.
	if _, err := Run(ctx, d, eng, Options{Module: "bw", Step: "ro", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatalf("a changed hold without etcd: %v; want it run, taking no slot", err)
	}

	var during ledger.Budget
	opened := func() {
		if during, err = l.TakeSlot(ctx, ledger.Slot{Host: "h2", Module: "bw", Token: "other"}, 1); err != nil {
			t.Error(err)
		}
	}
	b := &coord.Budget{Dir: d, Store: l, Host: "h1", Wait: 5 * time.Second, Now: time.Now, Progress: func(string, ...any) {}}
	if _, err := Run(ctx, d, eng, Options{Module: "bw", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}, Budget: b, Opened: opened}); err != nil {
		t.Fatal(err)
	}
	if during.Taken || len(during.Holders) != 1 || during.Holders[0].Host != "h1" {
		t.Errorf("h2's try while the window was open: %+v; want refused, held by h1", during)
	}
	if st, _ := l.Mesh(ctx, "bw"); len(st.Slots) != 0 {
		t.Errorf("slots after the close: %+v; want h1's given back", st.Slots)
	}
}
