package window

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/state"
)

// List returns the windows not yet closed, each with its state, and the
// history, oldest first. It reads snapshots and takes no lock, as
// coord.ClassifySnapshot does. The engine may not say whether a dead
// window's step container runs. Then that hold reads unknown, and warn says why.
func List(ctx context.Context, d *state.Dir, connect func() (engine.Client, error), now time.Time, warn func(string, ...any)) ([]coord.View, []coord.Entry, error) {
	classified, hist, stepsErr, err := coord.ClassifySnapshot(ctx, d, connect, now)
	if err != nil {
		return nil, nil, err
	}
	if stepsErr != nil {
		warn("cannot tell whether the step containers of dead windows still run: %v\n", stepsErr)
	}
	views := []coord.View{}
	for _, c := range classified {
		views = append(views, coord.ViewOf(c.Hold, c.State))
	}
	entries := hist.Windows
	if entries == nil {
		entries = []coord.Entry{}
	}
	return views, entries, nil
}
