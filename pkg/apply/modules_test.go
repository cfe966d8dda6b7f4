package apply

import (
	"slices"
	"testing"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// inModule returns c as module m's container (running() makes module "m").
func inModule(c engine.Container, m string) engine.Container {
	c.Name = m + c.Name[len("m"):]
	c.Labels[lifecycle.LabelModule] = m
	return c
}

// TestPlanOwnsItsModules: a file owns its modules. Another module's
// containers are not planned at all (not even as orphans, not even with
// --prune); a removed module's are removed, without --prune, but a held one
// stays held.
func TestPlanOwnsItsModules(t *testing.T) {
	web := &mesh.Container{Image: "meshtest/busybox:1"}
	other := inModule(running(t, "x", web), "other")
	gone := inModule(running(t, "y", web), "gone")
	held := inModule(running(t, "z", web), "gone")
	for _, prune := range []bool{false, true} {
		in := Input{Desired: want(t, map[string]*mesh.Container{"a": web}), Scope: scope, Prune: prune,
			Observed: []engine.Container{running(t, "a", web), running(t, "old", web), other, gone, held},
			Holds:    map[string]HoldRef{"gone.z": {Window: "w-1"}},
			Modules:  map[string]bool{"m": true, "gone": true}, Remove: map[string]bool{"gone": true}}
		got := lines(Plan(in))
		orphan := line{"m.old", Orphan, []string{"not in the mesh file; --prune removes it"}, ""}
		if prune {
			orphan = line{"m.old", Remove, []string{"not in the mesh file"}, ""}
		}
		wantLines := []line{
			{"gone.y", Remove, []string{"module gone removed"}, ""},
			{"gone.z", Held, []string{"held by window w-1; no longer in the mesh file"}, "w-1"},
			{"m.a", Unchanged, nil, ""},
			orphan,
		}
		if !slices.EqualFunc(got, wantLines, func(a, b line) bool { return a.String() == b.String() }) {
			t.Errorf("prune=%v:\n got %v\nwant %v", prune, got, wantLines)
		}
	}
}
