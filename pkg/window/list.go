package window

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// List returns the windows not yet closed, each with its state and its
// step's progress, and the history, oldest first. It reads snapshots and takes no lock, as
// coord.ClassifySnapshot does. The engine may not say whether a dead
// window's step container runs. Then that hold reads unknown, and warn says why.
// A dead mesh window's hold is classified through m, as status does.
func List(ctx context.Context, d *state.Dir, connect func() (engine.Client, error), now time.Time, m coord.Mesh, warn func(string, ...any)) ([]OpenView, []coord.Entry, error) {
	classified, hist, stepsErr, err := coord.ClassifySnapshotMesh(ctx, d, connect, now, m)
	if err != nil {
		return nil, nil, err
	}
	if stepsErr != nil {
		warn("cannot tell whether the step containers of dead windows still run: %v\n", stepsErr)
	}
	views := []coord.View{}
	for _, c := range classified {
		views = append(views, c.View())
	}
	entries := hist.Windows
	if entries == nil {
		entries = []coord.Entry{}
	}
	return Progress(d, views, now, warn), entries, nil
}

// StepView is one step of a module, as window list --steps shows it.
type StepView struct {
	Module  string   `json:"module"`
	Step    string   `json:"step"`
	Holds   []HeldAs `json:"holds"`
	Timeout string   `json:"timeout"`
	// Mesh is where the step holds: host or all. Gather is set only
	// with all.
	Mesh   string `json:"mesh"`
	Gather string `json:"gather,omitempty"`
}

// Steps lists every module's steps in the applied record, sorted by
// module and step. ok is false when nothing was applied yet.
func Steps(d *state.Dir) (views []StepView, ok bool, err error) {
	a, ok, err := record.LoadApplied(d)
	views = []StepView{}
	if err != nil || !ok || a.File == nil {
		return views, false, err
	}
	for _, module := range a.File.ModuleNames() {
		m := a.File.Modules[module]
		if m == nil {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(m.Steps)) {
			if s := m.Steps[name]; s != nil {
				views = append(views, stepView(module, name, s))
			}
		}
	}
	return views, true, nil
}

// stepView is step name of module, as window list --steps shows it.
func stepView(module, name string, s *mesh.Step) StepView {
	v := StepView{Module: module, Step: name, Holds: []HeldAs{}, Timeout: s.TimeoutOrDefault().String(), Mesh: mesh.MeshHost}
	if s.MeshAll() {
		v.Mesh, v.Gather = mesh.MeshAll, s.GatherOrDefault().String()
	}
	for _, c := range s.WhileStopped {
		v.Holds = append(v.Holds, HeldAs{Name: mesh.EngineName(module, c), Mode: ModeStopped})
	}
	for _, c := range s.ChangedNames() {
		v.Holds = append(v.Holds, HeldAs{Name: mesh.EngineName(module, c), Mode: ModeChanged})
	}
	return v
}
