package window

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/state"
)

// List returns the windows not yet closed, each with its state, and the
// history, oldest first. It reads snapshots and takes no lock. The engine is
// asked only when a dead window's step container might still run; if it
// cannot be reached, such a hold reads stale and warn says why.
func List(ctx context.Context, d *state.Dir, connect func() (engine.Client, error), now time.Time, warn func(string, ...any)) ([]holds.View, []holds.Entry, error) {
	var hd holds.Doc
	var hist holds.History
	if _, err := d.Read(holds.File, &hd); err != nil {
		return nil, nil, err
	}
	if _, err := d.Read(holds.HistoryFile, &hist); err != nil {
		return nil, nil, err
	}
	live := holds.Liveness{Dir: d, StepRunning: func(name string) bool {
		eng, err := connect()
		if err != nil {
			warn("cannot tell whether step container %s still runs: %v\n", name, err)
			return false
		}
		defer eng.Close()
		c, err := eng.Inspect(ctx, name)
		if err != nil && !engine.IsNotFound(err) {
			warn("cannot tell whether step container %s still runs: %v\n", name, err)
		}
		return err == nil && c.Running && c.Labels[apply.LabelRole] == apply.RoleStep
	}}
	classified, err := live.Classify(&hd, now)
	if err != nil {
		return nil, nil, err
	}
	views := []holds.View{}
	for _, c := range classified {
		views = append(views, holds.ViewOf(c.Hold, c.State))
	}
	entries := hist.Windows
	if entries == nil {
		entries = []holds.Entry{}
	}
	return views, entries, nil
}
