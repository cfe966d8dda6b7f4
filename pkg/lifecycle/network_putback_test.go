package lifecycle

import (
	"context"
	"errors"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// lostNetworkAnswers is an engine whose first network disconnect is done
// but answered with an error, and whose next network lookups fail.
type lostNetworkAnswers struct {
	*enginetest.Fake
	disconnects, lookups *int
}

func (f lostNetworkAnswers) DisconnectNetwork(ctx context.Context, network, container string) error {
	err := f.Fake.DisconnectNetwork(ctx, network, container)
	if *f.disconnects > 0 {
		*f.disconnects--
		return errors.New("connection reset: the answer was lost")
	}
	return err
}

func (f lostNetworkAnswers) InspectNetwork(ctx context.Context, idOrName string) (engine.Network, error) {
	if *f.lookups > 0 {
		*f.lookups--
		return engine.Network{}, errors.New("engine says no")
	}
	return f.Fake.InspectNetwork(ctx, idOrName)
}

// TestNetworkPutBackAsksAgain: a replace whose disconnect's answer is lost
// puts back what it stopped; its lookup of the network fails twice, and is
// made again, so the container runs on the network again (harness seed
// 52069: the put-back gave up at one failed lookup, the service stopped).
func TestNetworkPutBackAsksAgain(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("img:1")
	const net = "meshctl.m.back"
	if _, err := f.CreateNetwork(ctx, net, NetworkSpec("scope", "m", "back", false)); err != nil {
		t.Fatal(err)
	}
	id, err := f.Create(ctx, "m.svc", engine.Spec{Image: "img:1", Networks: map[string][]string{net: {"svc"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	c, err := f.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	old, err := f.InspectNetwork(ctx, net)
	if err != nil {
		t.Fatal(err)
	}
	disconnects, lookups := 1, 2
	x := Executor{Engine: lostNetworkAnswers{Fake: f, disconnects: &disconnects, lookups: &lookups}, Scope: "scope"}
	err = x.ReplaceNetwork(ctx, old, true, []engine.Container{c})
	re := (*NetworkReplaceError)(nil)
	if !errors.As(err, &re) || re.NetErr != nil || re.Left["m.svc"] != nil {
		t.Fatalf("ReplaceNetwork = %v, want a failed replace with everything put back", err)
	}
	after, err := f.Inspect(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	n, err := f.InspectNetwork(ctx, net)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Running || len(n.Containers) != 1 {
		t.Errorf("m.svc is %s, the network has %v: want it running on the network", after.State, n.Containers)
	}
}
