package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// budgetFile is module m with max-unavailable budget and one container
// app, whose env V is v. app is recreated stop-first when v changes.
func budgetFile(t testing.TB, budget int, v string) *mesh.File {
	t.Helper()
	f, err := mesh.Decode("mesh.yaml", []byte(fmt.Sprintf(
		"modules:\n  m:\n    max-unavailable: %d\n    containers:\n      app: {image: %s, env: {V: %q}}\n", budget, busybox, v)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// countingStore counts the etcd calls the budget makes.
type countingStore struct {
	coord.MeshStore
	calls atomic.Int64
}

func (c *countingStore) PutMember(ctx context.Context, m ledger.Member) error {
	c.calls.Add(1)
	return c.MeshStore.PutMember(ctx, m)
}

func (c *countingStore) RemoveMember(ctx context.Context, module, host string) error {
	c.calls.Add(1)
	return c.MeshStore.RemoveMember(ctx, module, host)
}

func (c *countingStore) TakeSlot(ctx context.Context, sl ledger.Slot, own int) (ledger.Budget, error) {
	c.calls.Add(1)
	return c.MeshStore.TakeSlot(ctx, sl, own)
}

func (c *countingStore) GiveBackSlot(ctx context.Context, module, host, token string) (bool, error) {
	c.calls.Add(1)
	return c.MeshStore.GiveBackSlot(ctx, module, host, token)
}

// meshHost is one host of a test mesh: its state directory, engine and
// budget over the shared etcd prefix.
type meshHost struct {
	name  string
	d     *state.Dir
	eng   *enginetest.Fake
	l     *ledger.Ledger
	store *countingStore
}

func meshHosts(t *testing.T, n int) []*meshHost {
	t.Helper()
	eps := etcdtest.Endpoints(t)
	prefix := etcdtest.Prefix(t.Name())
	var out []*meshHost
	for i := range n {
		l, err := ledger.OpenEtcd(ledger.EtcdConfig{Endpoints: strings.Split(eps, ","), Prefix: prefix, Timeout: 20 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		out = append(out, &meshHost{name: fmt.Sprintf("h%d", i+1), d: stateDir(t), eng: enginetest.NewFake(busybox), l: l,
			store: &countingStore{MeshStore: l}})
	}
	return out
}

func (h *meshHost) apply(t testing.TB, f *mesh.File, wait time.Duration) error {
	t.Helper()
	_, err := run(t, h.d, h.eng, f, func(o *Options) {
		o.Settle = 300 * time.Millisecond
		o.Budget = &coord.Budget{Dir: h.d, Store: h.store, Host: h.name, Wait: wait, Now: time.Now,
			Progress: func(string, ...any) {}}
	})
	return err
}

// TestBudgetNoOpMakesNoEtcdCall: the first apply records the member; an
// apply that changes nothing, and one of a file without max-unavailable,
// make no etcd call. A file ledger (no budget) refuses max-unavailable
// before anything is touched.
func TestBudgetNoOpMakesNoEtcdCall(t *testing.T) {
	h := meshHosts(t, 1)[0]
	if _, err := run(t, h.d, h.eng, budgetFile(t, 1, "1"), nil); err == nil || !strings.Contains(err.Error(), "needs an etcd ledger") {
		t.Fatalf("no budget: %v; want max-unavailable refused", err)
	}
	if n := len(h.eng.Containers()); n != 0 {
		t.Fatalf("a refused apply left %d containers", n)
	}
	if err := h.apply(t, budgetFile(t, 1, "1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if n := h.store.calls.Load(); n != 1 {
		t.Errorf("the first apply made %d etcd calls, want 1 (its member record)", n)
	}
	h.store.calls.Store(0)
	if err := h.apply(t, budgetFile(t, 1, "1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if n := h.store.calls.Load(); n != 0 {
		t.Errorf("a no-op apply made %d etcd calls, want none", n)
	}
	st, err := h.l.Mesh(context.Background(), "m")
	if err != nil || len(st.Members) != 1 || st.Members[0].Host != "h1" || st.Members[0].MaxUnavailable != 1 {
		t.Errorf("members %+v, %v; want h1's, max-unavailable 1", st.Members, err)
	}
}

// TestBudgetThreeHostsNeverTwoDown: three hosts apply a stop-first change
// at once under max-unavailable 1. From each engine's events, a host is
// down from the old container's stop until the new one's start plus the
// settle period, when it counts healthy. No two such spans overlap.
func TestBudgetThreeHostsNeverTwoDown(t *testing.T) {
	hosts := meshHosts(t, 3)
	for _, h := range hosts {
		if err := h.apply(t, budgetFile(t, 1, "1"), time.Second); err != nil {
			t.Fatal(err)
		}
		// A stop that takes a while, so that spans would overlap.
		h.eng.Hook = func(op, target string) {
			if op == enginetest.OpStop {
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	begin := time.Now()
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(func() {
			if err := h.apply(t, budgetFile(t, 1, "2"), 30*time.Second); err != nil {
				t.Errorf("%s: %v", h.name, err)
			}
		})
	}
	wg.Wait()
	type span struct {
		host       string
		from, till time.Time
	}
	var spans []span
	for _, h := range hosts {
		var s span
		for _, e := range h.eng.Events() {
			switch {
			case e.At.Before(begin):
			case e.Op == enginetest.OpStop && e.Name == "m.app" && s.from.IsZero():
				// The stop's event is recorded when it ends: it began 200ms before.
				s = span{host: h.name, from: e.At.Add(-200 * time.Millisecond)}
			case e.Op == enginetest.OpStart && !s.from.IsZero() && s.till.IsZero():
				s.till = e.At.Add(300 * time.Millisecond)
			}
		}
		if s.from.IsZero() || s.till.IsZero() {
			t.Fatalf("%s: no stop and start in its events: %v", h.name, h.eng.Events())
		}
		spans = append(spans, s)
	}
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.from.Before(b.till) && b.from.Before(a.till) {
				t.Errorf("%s down %s–%s and %s down %s–%s at once", a.host, a.from.Format("05.000"), a.till.Format("05.000"),
					b.host, b.from.Format("05.000"), b.till.Format("05.000"))
			}
		}
	}
	st, err := hosts[0].l.Mesh(context.Background(), "m")
	if err != nil || len(st.Slots) != 0 || len(st.Members) != 3 {
		t.Errorf("after the applies: %+v, %v; want 3 members and no slot held", st, err)
	}
}

// TestBudgetDeadHolderFreed: an apply that died holding its slot leaves it
// held (no lease). Another host then waits and exits 3 naming it. The
// dead apply's host frees it at its next apply, a no-op, once the module
// runs healthy. mesh release (GiveBackSlot with no token) frees one too.
func TestBudgetDeadHolderFreed(t *testing.T) {
	hosts := meshHosts(t, 2)
	ctx := context.Background()
	for _, h := range hosts {
		if err := h.apply(t, budgetFile(t, 1, "1"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// An apply of h1 that died after taking its slot: its budget lock goes.
	dead := &coord.Budget{Dir: hosts[0].d, Store: hosts[0].l, Host: "h1", Wait: time.Second, Now: time.Now, Progress: func(string, ...any) {}}
	if err := dead.Take(ctx, "m", 1, []string{"m.app"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	dead.Close()

	err := hosts[1].apply(t, budgetFile(t, 1, "2"), time.Second)
	var busy *coord.SlotBusyError
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), "held by h1") {
		t.Fatalf("h2 under h1's dead slot: %v; want a SlotBusyError naming h1", err)
	}
	if c, _ := hosts[1].eng.Get("m.app"); !slices.Contains(c.Spec.Env, "V=1") || !c.Running {
		t.Errorf("h2's container after a refused apply: %+v; want the old one running", c)
	}

	if err := hosts[0].apply(t, budgetFile(t, 1, "1"), time.Second); err != nil {
		t.Fatal(err)
	}
	if st, _ := hosts[0].l.Mesh(ctx, "m"); len(st.Slots) != 0 {
		t.Fatalf("h1's next apply left the dead slot: %+v", st.Slots)
	}
	if err := hosts[1].apply(t, budgetFile(t, 1, "2"), time.Second); err != nil {
		t.Fatalf("h2 once the slot is free: %v", err)
	}

	// A dead slot again, freed by mesh release's call.
	dead = &coord.Budget{Dir: hosts[0].d, Store: hosts[0].l, Host: "h1", Wait: time.Second, Now: time.Now, Progress: func(string, ...any) {}}
	if err := dead.Take(ctx, "m", 1, []string{"m.app"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	dead.Close()
	if ok, err := hosts[1].l.GiveBackSlot(ctx, "m", "h1", ""); err != nil || !ok {
		t.Fatalf("release: %v, %v", ok, err)
	}
	if err := hosts[1].apply(t, budgetFile(t, 1, "3"), time.Second); err != nil {
		t.Fatalf("h2 once the slot is released: %v", err)
	}

	// A dead slot of a module h1 then removes: removed, it is not down.
	dead = &coord.Budget{Dir: hosts[0].d, Store: hosts[0].l, Host: "h1", Wait: time.Second, Now: time.Now, Progress: func(string, ...any) {}}
	if err := dead.Take(ctx, "m", 1, []string{"m.app"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	dead.Close()
	_, err = run(t, hosts[0].d, hosts[0].eng, nil, func(o *Options) {
		o.RemoveModules = []string{"m"}
		o.Budget = &coord.Budget{Dir: hosts[0].d, Store: hosts[0].store, Host: "h1", Wait: time.Second, Now: time.Now, Progress: func(string, ...any) {}}
	})
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := hosts[0].l.Mesh(ctx, "m"); len(st.Slots) != 0 || len(st.Members) != 1 || st.Members[0].Host != "h2" {
		t.Errorf("after h1 removed m: %+v; want h2 the one member, no slot", st)
	}
}

// takes counts the TakeSlot calls of a countingStore.
type takes struct {
	*countingStore
	n atomic.Int64
}

func (c *takes) TakeSlot(ctx context.Context, sl ledger.Slot, own int) (ledger.Budget, error) {
	c.n.Add(1)
	return c.countingStore.TakeSlot(ctx, sl, own)
}

// TestBudgetWhatTakesASlot: a stop-first recreate of a running container
// and a network replace take a slot; a create, a start-first recreate, a
// repair of a stopped container and a removal take none.
func TestBudgetWhatTakesASlot(t *testing.T) {
	h := meshHosts(t, 1)[0]
	tk := &takes{countingStore: h.store}
	file := func(internal bool, order, v string, extra string) *mesh.File {
		f, err := mesh.Decode("mesh.yaml", []byte(fmt.Sprintf(`modules:
  m:
    max-unavailable: 1
    networks: {net: {internal: %t}}
    containers:
      app: {image: %s, networks: [net], update-order: %s, drain: 2s, env: {V: %q}}
%s`, internal, busybox, order, v, extra)))
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	step := func(name string, f *mesh.File, prune bool, want int64) {
		t.Helper()
		tk.n.Store(0)
		_, err := run(t, h.d, h.eng, f, func(o *Options) {
			o.Prune = prune
			o.Budget = &coord.Budget{Dir: h.d, Store: tk, Host: h.name, Wait: time.Second, Now: time.Now, Progress: func(string, ...any) {}}
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := tk.n.Load(); got != want {
			t.Errorf("%s took %d slots, want %d", name, got, want)
		}
	}
	const other = "      other: {image: " + busybox + "}\n"
	step("a create", file(false, "stop-first", "1", other), false, 0)
	step("a start-first recreate", file(false, "start-first", "2", other), false, 0)
	step("a stop-first recreate", file(false, "stop-first", "3", other), false, 1)
	h.eng.SetRunning("m.app", false)
	step("a repair of a stopped container", file(false, "stop-first", "4", other), false, 0)
	step("a removal", file(false, "stop-first", "4", ""), true, 0)
	// Its containers are recreated start-first after it, which takes none.
	step("a network replace", file(true, "start-first", "4", ""), false, 1)
}
