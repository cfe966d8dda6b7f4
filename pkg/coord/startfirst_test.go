package coord

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// realHost is the test engine, with a module of its own. proxied talks to
// it through a fault proxy, direct without one.
type realHost struct {
	proxied, direct lifecycle.Executor
	proxy           *faultproxy.Proxy
	host, module    string
}

// newRealHost starts a proxy in front of the test engine. Everything of
// its module goes when the test ends.
func newRealHost(t *testing.T) *realHost {
	t.Helper()
	h := &realHost{host: enginetest.Host(t), module: fmt.Sprintf("sfheal%08x", rand.Uint32())}
	direct := enginetest.Client(t)
	enginetest.RequireImage(t, direct, enginetest.Image)
	var c engine.Client
	h.proxy, c = faultproxy.OnTestEngine(t)
	h.proxied = lifecycle.Executor{Engine: c, Scope: h.module}
	h.direct = lifecycle.Executor{Engine: direct, Scope: h.module}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, _ := direct.List(ctx, lifecycle.Managed(h.module))
		for _, c := range cs {
			_ = direct.Remove(ctx, c.ID)
		}
		_ = direct.RemoveNetwork(ctx, h.net())
	})
	return h
}

func (h *realHost) net() string  { return "meshctl." + h.module + ".net" }
func (h *realHost) name() string { return h.module + ".c" }

// desired is MODULE.c, start-first on the module network, at version v. A
// stop kills it at once.
func (h *realHost) desired(v string) *lifecycle.Desired {
	c := mesh.Container{Image: enginetest.Image, Command: []string{"sleep", "3600"}, Env: mesh.EnvVars{"V": v}}
	c.UpdateOrder = mesh.StartFirst
	c.Drain = mesh.Duration(time.Millisecond)
	c.StopSignal = "SIGKILL"
	spec := c.Spec(enginetest.Image)
	spec.Networks = map[string]mesh.SpecNetwork{h.net(): {}}
	return &lifecycle.Desired{Name: h.name(), Module: h.module, Container: "c", Def: c, Image: enginetest.Image, Spec: spec}
}

// heal lists the engine and heals dead as healDead does, direct.
func (h *realHost) heal(t *testing.T, dead []Claim) {
	t.Helper()
	ctx := context.Background()
	observed, err := h.direct.Engine.List(ctx, lifecycle.Managed(h.module))
	if err != nil {
		t.Fatal(err)
	}
	if kept, _, err := healDead(ctx, h.direct, observed, dead, func(string) bool { return true }, t.Logf); err != nil || len(kept) != 0 {
		t.Fatalf("healDead: kept %v, %v", kept, err)
	}
}

// TestHealRemovesALeftRetiring: a start-first recreate whose retirement
// failed for good left the old container as NAME.meshctl-retiring, and its
// apply ended. A removal that always failed left it stopped; a stop that
// always failed left it running. The next heal removes it, stopping it
// first: the new container, under the name, is the service.
func TestHealRemovesALeftRetiring(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule faultproxy.Rule
	}{
		{"removal fails", faultproxy.Rule{Method: "DELETE", Route: "/containers/{id}", Class: faultproxy.Fail}},
		{"stop fails", faultproxy.Rule{Method: "POST", Route: "/containers/{id}/stop", Class: faultproxy.Fail}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newRealHost(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if err := h.proxied.Create(ctx, h.desired("1")); err != nil {
				t.Fatal(err)
			}
			old, err := h.direct.Engine.Inspect(ctx, h.name())
			if err != nil {
				t.Fatal(err)
			}
			h.proxy.SetSchedule(faultproxy.NewSchedule(1, tc.rule))
			err = h.proxied.Recreate(ctx, h.desired("2"), old)
			h.proxy.SetSchedule(nil)
			if ol := (*lifecycle.OldLeftError)(nil); !errors.As(err, &ol) {
				t.Fatalf("Recreate: %v, want the old one left", err)
			}
			h.heal(t, nil)
			if _, err := h.direct.Engine.Inspect(ctx, old.ID); !engine.IsNotFound(err) {
				t.Errorf("the old container after the heal: %v, want it gone", err)
			}
			if c, err := h.direct.Engine.Inspect(ctx, h.name()); err != nil || !c.Running || c.ID == old.ID {
				t.Errorf("%s after the heal: %+v, %v; want the new one running", h.name(), c, err)
			}
		})
	}
}

// TestHealStartFirstBeforeGateTouchesNotTheOld: an apply killed in the
// gate of a start-first recreate left its new container, started, beside
// the old one, and a dead claim that says the old one ran. The heal
// removes the new one. The engine's own events show no stop, kill or
// start of the old one: start-first promises it serves until a new one
// has passed the gate.
func TestHealStartFirstBeforeGateTouchesNotTheOld(t *testing.T) {
	h := newRealHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.direct.Create(ctx, h.desired("1")); err != nil {
		t.Fatal(err)
	}
	old, err := h.direct.Engine.Inspect(ctx, h.name())
	if err != nil {
		t.Fatal(err)
	}
	newID, err := h.direct.Engine.Create(ctx, lifecycle.NewName(h.name()), h.desired("2").EngineSpec(h.module))
	if err == nil {
		err = h.direct.Engine.Start(ctx, newID)
	}
	if err != nil {
		t.Fatal(err)
	}
	rec, err := eventcheck.Record(ctx, h.host, func(name string, _ map[string]string) bool { return strings.HasPrefix(name, h.module) })
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	h.heal(t, []Claim{{ID: "c-1", PID: 1, Containers: []string{h.name()}, Ran: map[string]string{h.name(): old.ID}, StartsFirst: []string{h.name()}}})
	if err := rec.Sync(ctx, enginetest.Image); err != nil {
		t.Fatal(err)
	}
	for _, e := range rec.Events() {
		if e.ID == old.ID && slices.Contains([]string{"stop", "kill", "die", "start", "restart"}, e.Action) {
			t.Errorf("the heal touched the old container: %s at %s", e.Action, e.At.Format(time.StampMilli))
		}
	}
	if c, err := h.direct.Engine.Inspect(ctx, h.name()); err != nil || c.ID != old.ID || !c.Running {
		t.Errorf("%s after the heal: %+v, %v; want the old one running", h.name(), c, err)
	}
	if _, err := h.direct.Engine.Inspect(ctx, newID); !engine.IsNotFound(err) {
		t.Errorf("the unverified new one after the heal: %v, want it gone", err)
	}
}
