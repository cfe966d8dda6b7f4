package window

import (
	"context"
	"github.com/meshctl/meshctl/pkg/coord"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// List returns the windows not yet closed, each with its state, and the
// history, oldest first. It reads snapshots and takes no lock. The engine is
// asked only when a dead window's step container might still run; if it
// cannot be reached, such a hold reads unknown (still honoured) and warn
// says why.
func List(ctx context.Context, d *state.Dir, connect func() (engine.Client, error), now time.Time, warn func(string, ...any)) ([]coord.View, []coord.Entry, error) {
	var hd coord.HoldsDoc
	var hist coord.History
	if _, err := d.Read(coord.HoldsFile, &hd); err != nil {
		return nil, nil, err
	}
	if _, err := d.Read(coord.HistoryFile, &hist); err != nil {
		return nil, nil, err
	}
	// The engine is asked only where a dead window's step container might
	// still run; if it cannot say, such a hold reads unknown (kept).
	steps := func() (func(string) bool, error) {
		if !needsEngine(d, &hd) {
			return func(string) bool { return false }, nil
		}
		scope, ok, err := d.PeekID()
		if err != nil {
			return nil, err
		}
		if !ok {
			// No identity yet: this state directory made no container.
			return func(string) bool { return false }, nil
		}
		eng, err := connect()
		if err != nil {
			return nil, err
		}
		defer eng.Close()
		var observed []engine.Container
		return lifecycle.Observe(ctx, eng, scope, &observed)()
	}
	classified, stepsErr, err := coord.Liveness{Dir: d}.Classify(&hd, now, steps)
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

// needsEngine reports whether a hold of doc belongs to a dead window with a
// step container: only then does listing windows need the engine.
func needsEngine(d *state.Dir, doc *coord.HoldsDoc) bool {
	for _, h := range doc.Holds {
		if h.StepContainer == "" {
			continue
		}
		if alive, err := d.Held(coord.WindowLock(h.ID)); err != nil || !alive {
			return true
		}
	}
	return false
}
