package cli

import (
	"fmt"
	"strings"

	"github.com/meshctl/meshctl/pkg/window"
)

// windowStepsJSON is window list --steps -o json.
type windowStepsJSON struct {
	Steps []window.StepView `json:"steps"`
}

// runWindowSteps is window list --steps. It reads the applied record
// read-only, and needs no engine.
func runWindowSteps(env *Env) error {
	dir, err := env.StateReadOnly()
	if err != nil {
		return err
	}
	steps, applied, err := window.Steps(dir)
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
	tw := newTable(env.Stdout)
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
