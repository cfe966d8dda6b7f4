package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestModuleNetworkKeepsAnAddress: a module network meshctl creates has
// a configured subnet, the engine's own pick. So a container that leaves
// it rejoins at the address it had, as a start-first retirement does to
// keep connections in flight. On a network without one, Docker 20.10
// refuses the address.
func TestModuleNetworkKeepsAnAddress(t *testing.T) {
	h := newFaultHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.x.Create(ctx, h.desired("1")); err != nil {
		t.Fatal(err)
	}
	c, err := h.direct.Inspect(ctx, h.module+".c")
	if err != nil {
		t.Fatal(err)
	}
	addr := c.Addresses[h.net()]
	if addr == "" {
		t.Fatalf("%s has no address on %s", c.Name, h.net())
	}
	if err := h.direct.DisconnectNetwork(ctx, h.net(), c.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.direct.ConnectNetworkAt(ctx, h.net(), c.ID, addr); err != nil {
		t.Fatalf("rejoin %s at %s: %v", h.net(), addr, err)
	}
	if c, err = h.direct.Inspect(ctx, c.ID); err != nil || c.Addresses[h.net()] != addr {
		t.Errorf("after the rejoin %s is at %q on %s, want %s (%v)", c.Name, c.Addresses[h.net()], h.net(), addr, err)
	}
}

// TestCreateNetworkKeepsTheEnginesPick: CreateNetwork makes the network
// again with the range the engine gave it, configured. Given one, it
// makes it once with that range.
func TestCreateNetworkKeepsTheEnginesPick(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake(enginetest.Image)
	x := Executor{Engine: f, Scope: "s"}
	if err := x.EnsureNetworks(ctx, map[string]mesh.SpecNetwork{"meshctl.m.back": {}}); err != nil {
		t.Fatal(err)
	}
	id, err := f.Create(ctx, "m.c", engine.Spec{Image: enginetest.Image})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.ConnectNetworkAt(ctx, "meshctl.m.back", id, "198.18.1.9"); err != nil {
		t.Errorf("an address on the network EnsureNetworks made: %v", err)
	}
	f.Changes()
	if _, err := x.CreateNetwork(ctx, "meshctl.m.front", engine.NetworkSpec{Subnet: "198.18.9.0/24"}); err != nil {
		t.Fatal(err)
	}
	if got := f.Changes(); len(got) != 1 {
		t.Errorf("CreateNetwork with a subnet made %v, want one create", got)
	}
}
