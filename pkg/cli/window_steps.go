package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
)

// windowStepsJSON is window list --steps -o json.
type windowStepsJSON struct {
	Steps []stepJSON `json:"steps"`
}

// stepJSON is one step, with where it holds: mesh is host or all. Gather
// is set only with all.
type stepJSON struct {
	window.StepView
	Mesh   string `json:"mesh"`
	Gather string `json:"gather,omitempty"`
}

// runWindowSteps is window list --steps. It reads the applied record
// read-only, and needs no engine.
func runWindowSteps(env *Env) error {
	dir, err := env.StateReadOnly()
	if err != nil {
		return err
	}
	views, applied, err := window.Steps(dir)
	if err != nil {
		return err
	}
	steps, err := withMesh(dir, views)
	if err != nil {
		return err
	}
	if env.JSON() {
		return env.PrintJSON(windowStepsJSON{Steps: steps})
	}
	if env.Global.Quiet {
		return nil
	}
	switch {
	case !applied:
		env.Printf("no steps: nothing was applied in %s yet\n", dir.Path())
		return nil
	case len(steps) == 0:
		env.Printf("no steps: no applied module has one\n")
		return nil
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MODULE\tSTEP\tHOLDS\tTIMEOUT\tMESH")
	for _, s := range steps {
		var holds []string
		for _, h := range s.Holds {
			holds = append(holds, h.Name+" ("+h.Mode+")")
		}
		if len(holds) == 0 {
			holds = []string{"-"}
		}
		where := s.Mesh
		if s.Gather != "" {
			where += ", gather " + s.Gather
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Module, s.Step, strings.Join(holds, ", "), s.Timeout, where)
	}
	return tw.Flush()
}

// withMesh adds to each step where it holds, from the applied record. A
// step the record no longer has (an apply in between) reads host.
func withMesh(dir *state.Dir, views []window.StepView) ([]stepJSON, error) {
	out := make([]stepJSON, 0, len(views))
	a, ok, err := record.LoadApplied(dir)
	if err != nil {
		return nil, err
	}
	for _, v := range views {
		sj := stepJSON{StepView: v, Mesh: mesh.MeshHost}
		if ok && a.File != nil {
			if m := a.File.Modules[v.Module]; m != nil && m.Steps[v.Step].MeshAll() {
				sj.Mesh, sj.Gather = mesh.MeshAll, m.Steps[v.Step].GatherOrDefault().String()
			}
		}
		out = append(out, sj)
	}
	return out, nil
}
