package engine_test

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// TestNetworks: a network is created with its labels and internal flag,
// listed by label, and inspected with the containers attached; a container
// created on two networks (the second joined before its start) answers to
// its aliases on each; a network with a running container attached is not
// removed, one without is; a missing one is ErrNotFound, and a container
// on it does not start.
func TestNetworks(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	label := map[string]string{"io.meshctl.test": prefix}
	var nets []string
	for _, n := range []string{"a", "b"} {
		name := prefix + n
		if _, err := c.CreateNetwork(ctx, name, engine.NetworkSpec{Internal: n == "b", Labels: label}); err != nil {
			t.Fatal(err)
		}
		nets = append(nets, name)
		t.Cleanup(func() { _ = c.RemoveNetwork(context.Background(), name) })
	}
	list, err := c.Networks(ctx, label)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != nets[0] || list[1].Name != nets[1] || list[0].Internal || !list[1].Internal {
		t.Fatalf("Networks(label) = %+v, want %v, the second internal", list, nets)
	}
	// The test engine's networks never take a private-range address
	// (scripts/engine.sh gives it the pool 198.18.0.0/16).
	for _, n := range list {
		for _, s := range n.Subnets {
			if p, err := netip.ParsePrefix(s); err != nil || p.Addr().IsPrivate() {
				t.Errorf("network %s has subnet %s: a private range (%v)", n.Name, s, err)
			}
		}
		if len(n.Subnets) == 0 {
			t.Errorf("network %s: no subnet listed", n.Name)
		}
	}

	name := prefix + "ctr"
	id := create(t, c, name, engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "600"},
		Networks: map[string][]string{nets[0]: {"one"}, nets[1]: {"two", "deux"}}})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		got, err := c.InspectNetwork(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Containers, []string{name}) {
			t.Errorf("%s: containers %v, want [%s]", n, got.Containers, name)
		}
	}
	// A probe on the second network finds the container by its alias there.
	probe := create(t, c, prefix+"probe", engine.Spec{Image: enginetest.Image, Cmd: []string{"nslookup", "deux"},
		Networks: map[string][]string{nets[1]: nil}})
	if err := c.Start(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx, probe); err != nil || code != 0 {
		out, _ := c.Tail(ctx, probe, 20)
		t.Errorf("nslookup deux on %s: exit %d, %v: %s", nets[1], code, err, out)
	}

	if err := c.RemoveNetwork(ctx, nets[0]); err == nil || engine.IsNotFound(err) {
		t.Errorf("RemoveNetwork with a running container attached: %v, want refused", err)
	}
	if err := c.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveNetwork(ctx, nets[0]); err != nil {
		t.Errorf("RemoveNetwork of an unused network: %v", err)
	}
	if _, err := c.InspectNetwork(ctx, nets[0]); !engine.IsNotFound(err) {
		t.Errorf("InspectNetwork of a removed network: %v, want not found", err)
	}
	// The engine takes the create, and refuses the start.
	nonet := create(t, c, prefix+"nonet", engine.Spec{Image: enginetest.Image, Networks: map[string][]string{prefix + "missing": nil}})
	if err := c.Start(ctx, nonet); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Start on a missing network: %v", err)
	}
}

// TestDisconnectNotConnected: taking a container off a network it is not
// on is a not-found error, as the interface's fake has it: an apply killed
// while it made a network again (replaceNetwork), with some containers
// taken off it already, is carried through by the next one, whose
// disconnect of those finds them off (the engine answers 500 "is not
// connected to the network").
func TestDisconnectNotConnected(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	net := prefix + "disc"
	if _, err := c.CreateNetwork(ctx, net, engine.NetworkSpec{Labels: map[string]string{"io.meshctl.test": prefix}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveNetwork(context.Background(), net) })
	id := create(t, c, prefix+"disc", engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "600"},
		Networks: map[string][]string{net: nil}})
	if err := c.DisconnectNetwork(ctx, net, id); err != nil {
		t.Fatal(err)
	}
	if err := c.DisconnectNetwork(ctx, net, id); !engine.IsNotFound(err) {
		t.Errorf("DisconnectNetwork of a container not on the network: %v, want not found", err)
	}
	if err := c.DisconnectNetwork(ctx, prefix+"nonesuch", id); !engine.IsNotFound(err) {
		t.Errorf("DisconnectNetwork from a missing network: %v, want not found", err)
	}
}

// TestConnectNetworkAt: Inspect gives a running container's address on
// each network. Asked to join again at that address, an engine refuses on
// a network without a configured subnet (IsAddressRefused), as meshctl's
// own are. A plain join then gives the lowest free address, here its own.
func TestConnectNetworkAt(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	net := prefix + "at"
	if _, err := c.CreateNetwork(ctx, net, engine.NetworkSpec{Labels: map[string]string{"io.meshctl.test": prefix}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.RemoveNetwork(context.Background(), net) })
	id := create(t, c, prefix+"at", engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "600"},
		Networks: map[string][]string{net: nil}})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	ct, err := c.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	addr := ct.Addresses[net]
	if addr == "" {
		t.Fatalf("Inspect: addresses %v, want one on %s", ct.Addresses, net)
	}
	if err := c.DisconnectNetwork(ctx, net, id); err != nil {
		t.Fatal(err)
	}
	if err := c.ConnectNetworkAt(ctx, net, id, addr); !engine.IsAddressRefused(err) {
		t.Errorf("ConnectNetworkAt on a network without a configured subnet: %v, want refused", err)
	}
	if err := c.ConnectNetwork(ctx, net, id, nil); err != nil {
		t.Fatal(err)
	}
	if ct, err := c.Inspect(ctx, id); err != nil || ct.Addresses[net] != addr {
		t.Errorf("Inspect after the join: addresses %v (%v), want %s again", ct.Addresses, err, addr)
	}
}
