package apply

import (
	"slices"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// inModule returns c as module m's container (running() makes module "m").
func inModule(c engine.Container, m string) engine.Container {
	c.Name = m + c.Name[len("m"):]
	c.Labels[LabelModule] = m
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

// TestMergeKeepsOtherModules: the applied state after an apply keeps the
// modules its file does not name, with their images and records, drops the
// removed ones, and takes the file's.
func TestMergeKeepsOtherModules(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	c := &mesh.Container{Image: "meshtest/busybox:1"}
	prev := &Applied{AppliedAt: t0, Source: "/old.yaml",
		File: &mesh.File{Modules: map[string]*mesh.Module{
			"a": {Containers: map[string]*mesh.Container{"x": c}},
			"b": {Containers: map[string]*mesh.Container{"y": c}},
			"c": {Containers: map[string]*mesh.Container{"z": c}}}},
		Images: map[string]Resolved{"a.x": {Image: "i1"}, "b.y": {Image: "i2"}, "c.z": {Image: "i3"}}}
	f := &mesh.File{Modules: map[string]*mesh.Module{"b": {Containers: map[string]*mesh.Container{"w": c}}}}
	desired, err := Desire(f, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := prev.Merge(f, []string{"c"}, desired, "/b.yaml", t1, false)
	if names := got.ModuleNames(); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("modules %v, want [a b]", names)
	}
	if _, ok := got.File.Modules["b"].Containers["y"]; ok {
		t.Error("b.y kept: the file's module replaces the applied one")
	}
	if got.Images["a.x"].Image != "i1" || got.Images["b.w"].Image != "meshtest/busybox:1" || len(got.Images) != 2 {
		t.Errorf("images %v", got.Images)
	}
	if r := got.Modules["a"]; r.Source != "/old.yaml" || !r.AppliedAt.Equal(t0) {
		t.Errorf("module a's record %+v, want the old one", r)
	}
	if r := got.Modules["b"]; r.Source != "/b.yaml" || !r.AppliedAt.Equal(t1) {
		t.Errorf("module b's record %+v", r)
	}
}
