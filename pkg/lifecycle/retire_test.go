package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// faultHost is the test engine behind a fault proxy, with a module of its
// own. x talks through the proxy, direct to the engine.
type faultHost struct {
	x      Executor
	direct engine.Client
	proxy  *faultproxy.Proxy
	module string
}

// newFaultHost starts a proxy in front of the test engine. Everything of
// its module goes when the test ends.
func newFaultHost(t *testing.T) *faultHost {
	t.Helper()
	direct := enginetest.Client(t)
	enginetest.RequireImage(t, direct, enginetest.Image)
	p, c := faultproxy.OnTestEngine(t)
	h := &faultHost{direct: direct, proxy: p, module: fmt.Sprintf("retire%08x", rand.Uint32())}
	h.x = Executor{Engine: c, Scope: h.module}
	t.Cleanup(func() { h.clean(t) })
	return h
}

// clean removes the module's containers and network.
func (h *faultHost) clean(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := h.direct.List(ctx, Managed(h.x.Scope))
	if err != nil {
		t.Error(err)
	}
	for _, c := range cs {
		_ = h.direct.Remove(ctx, c.ID)
	}
	_ = h.direct.RemoveNetwork(ctx, h.net())
}

func (h *faultHost) net() string { return "meshctl." + h.module + ".net" }

// desired is MODULE.c, start-first on the module network, at version v. A
// stop kills it at once.
func (h *faultHost) desired(v string) *Desired {
	c := mesh.Container{Image: enginetest.Image, Command: []string{"sleep", "3600"}, Env: mesh.EnvVars{"V": v}}
	c.UpdateOrder = mesh.StartFirst
	c.Drain = mesh.Duration(time.Millisecond)
	c.StopSignal = "SIGKILL"
	spec := c.Spec(enginetest.Image)
	spec.Networks = map[string]mesh.SpecNetwork{h.net(): {}}
	return &Desired{Name: h.module + ".c", Module: h.module, Container: "c", Def: c, Image: enginetest.Image, Spec: spec}
}

// recreate creates version 1, then recreates it as version 2 with the
// proxy faulting by rules. It returns Recreate's error.
func (h *faultHost) recreate(t *testing.T, rules ...faultproxy.Rule) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.x.Create(ctx, h.desired("1")); err != nil {
		t.Fatal(err)
	}
	old, err := h.direct.Inspect(ctx, h.module+".c")
	if err != nil {
		t.Fatal(err)
	}
	h.proxy.SetSchedule(faultproxy.NewSchedule(1, rules...))
	defer h.proxy.SetSchedule(nil)
	return h.x.Recreate(ctx, h.desired("2"), old)
}

// leftRetiring is the engine's view of MODULE.c.meshctl-retiring, if any.
func (h *faultHost) leftRetiring(t *testing.T) (engine.Container, bool) {
	t.Helper()
	c, err := h.direct.Inspect(context.Background(), RetiringName(h.module+".c"))
	if engine.IsNotFound(err) {
		return c, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, true
}

var (
	failDisconnect = func(nth int) faultproxy.Rule {
		return faultproxy.Rule{Method: "POST", Route: "/networks/{id}/disconnect", Nth: nth, Class: faultproxy.Fail}
	}
	failStops = func(times int) faultproxy.Rule {
		return faultproxy.Rule{Method: "POST", Route: "/containers/{id}/stop", Times: times, Class: faultproxy.Fail}
	}
	failRemoves = faultproxy.Rule{Method: "DELETE", Route: "/containers/{id}", Class: faultproxy.Fail}
)

// TestRetireSeesFailedCallsThrough: a start-first recreate whose
// retirement meets failed engine calls tries again from what the engine
// says is left. The old one's disconnect and its stop fail once, or its
// stop twice. The recreate still succeeds, with no retiring container left
// to answer the service's aliases. (The first disconnect is the new
// one's, as it takes the aliases.)
func TestRetireSeesFailedCallsThrough(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rules  []faultproxy.Rule
		faults int
	}{
		{"disconnect and stop fail once", []faultproxy.Rule{failDisconnect(2), failStops(1)}, 2},
		{"stop fails twice", []faultproxy.Rule{failStops(2)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFaultHost(t)
			err := h.recreate(t, tc.rules...)
			if c, ok := h.leftRetiring(t); ok {
				t.Errorf("%s left: running %v, state %s", c.Name, c.Running, c.State)
			}
			if err != nil {
				t.Errorf("Recreate: %v", err)
			}
			if n := h.proxy.Counts()[faultproxy.Fail]; n != tc.faults {
				t.Errorf("%d faults injected, want %d", n, tc.faults)
			}
		})
	}
}

// TestRetireSaysWhatIsLeft: a retirement that cannot be seen through
// says truly what it left. A stop that always fails leaves the old one
// running aside, and the error says so. A removal that always fails
// leaves it stopped, and the error says that.
func TestRetireSaysWhatIsLeft(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rule    faultproxy.Rule
		running bool
		says    string
	}{
		{"stop fails", failStops(0), true, "it still runs, aside, as "},
		{"removal fails", failRemoves, false, "it stays aside, stopped, as "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFaultHost(t)
			err := h.recreate(t, tc.rule)
			var ol *OldLeftError
			if !errors.As(err, &ol) || !strings.Contains(err.Error(), tc.says+RetiringName(h.module+".c")) {
				t.Fatalf("Recreate: %v; want an OldLeftError saying %q", err, tc.says)
			}
			c, ok := h.leftRetiring(t)
			if !ok || c.Running != tc.running {
				t.Errorf("%s: there %v, running %v; the error says running %v", RetiringName(h.module+".c"), ok, c.Running, tc.running)
			}
		})
	}
}

// removingEngine is an engine already removing one container. Its removal
// reads "already in progress", and the container reads removing for a few
// looks before it is gone.
type removingEngine struct {
	*enginetest.Fake
	id    string
	looks int
}

func (e *removingEngine) Remove(ctx context.Context, id string) error {
	if id == e.id {
		return errors.New("removal of container " + id + " is already in progress")
	}
	return e.Fake.Remove(ctx, id)
}

func (e *removingEngine) Inspect(ctx context.Context, idOrName string) (engine.Container, error) {
	if idOrName != e.id {
		return e.Fake.Inspect(ctx, idOrName)
	}
	if e.looks++; e.looks > 3 {
		_ = e.Fake.Remove(ctx, e.id)
		return e.Fake.Inspect(ctx, idOrName)
	}
	c, err := e.Fake.Inspect(ctx, idOrName)
	c.State, c.Running = StateRemoving, false
	return c, err
}

// TestRemoveGoneWaitsOutARemoval: a container the engine is removing
// already is waited for, not reported as left.
func TestRemoveGoneWaitsOutARemoval(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1")
	id, err := f.Create(ctx, OldName("m.c"), engine.Spec{Image: "old:1"})
	if err != nil {
		t.Fatal(err)
	}
	e := &removingEngine{Fake: f, id: id}
	if err := (Executor{Engine: e, Scope: "s"}).RemoveGone(ctx, id); err != nil {
		t.Errorf("RemoveGone of a container being removed: %v", err)
	}
	if e.looks <= 3 {
		t.Errorf("RemoveGone looked %d times; it decided while the removal was under way", e.looks)
	}
}
