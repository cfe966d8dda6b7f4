package coord

import (
	"context"
	"errors"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestBringBackCreatesAMissingNetwork: a container a window brings back (its
// close, or the release of a dead window's hold) whose module network was
// removed meanwhile finds it created first, labelled as the state
// directory's, with the definition its recorded spec holds; an external
// network that is missing is an error that says meshctl never creates one,
// and the container is not started.
func TestBringBackCreatesAMissingNetwork(t *testing.T) {
	ctx := context.Background()
	eng := enginetest.NewFake(busybox)
	x := lifecycle.Executor{Engine: eng, Scope: "scope-1"}
	spec := mesh.Spec{V: mesh.SpecVersion, Image: busybox, Networks: map[string]mesh.SpecNetwork{
		"meshctl.m.back": {Internal: true}}}
	eng.AddNetwork("meshctl.m.back", nil)
	id, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Networks: map[string][]string{"meshctl.m.back": {"c"}},
		Labels: map[string]string{lifecycle.LabelManaged: "scope-1", lifecycle.LabelSpec: spec.Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.RemoveNetwork(ctx, "meshctl.m.back"); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	c, _ := eng.Inspect(ctx, id)
	if err := BringBack(ctx, x, c, "always"); err != nil {
		t.Fatal(err)
	}
	if got := eng.Changes(); len(got) == 0 || got[0] != "create-network meshctl.m.back" {
		t.Errorf("changes %v: the network is not created first", got)
	}
	nets := eng.NetworkList()
	if len(nets) != 1 || !nets[0].Internal || nets[0].Labels[lifecycle.LabelManaged] != "scope-1" || nets[0].Labels[lifecycle.LabelModule] != "m" ||
		nets[0].Labels[lifecycle.LabelNetwork] != "back" {
		t.Errorf("networks %+v", nets)
	}

	ext := mesh.Spec{V: mesh.SpecVersion, Image: busybox, Networks: map[string]mesh.SpecNetwork{"proxy": {}}}
	id2, err := eng.Create(ctx, "m.d", engine.Spec{Image: busybox, Labels: map[string]string{lifecycle.LabelManaged: "scope-1", lifecycle.LabelSpec: ext.Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	c2, _ := eng.Inspect(ctx, id2)
	var missing *lifecycle.MissingNetworkError
	if err := BringBack(ctx, x, c2, "always"); !errors.As(err, &missing) || missing.Name != "proxy" {
		t.Errorf("BringBack with an external network missing: %v", err)
	}
	if got := eng.Changes(); len(got) > 0 {
		t.Errorf("changes %v, want none: an external network is never created, the container not started", got)
	}
}
