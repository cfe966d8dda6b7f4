package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshctl/meshctl/pkg/engine"
)

// retireTries bounds the tries to retire the old container of a
// start-first recreate. Between two tries, the engine says what is left.
const retireTries = 3

// retireThrough retires old, the old container of a start-first recreate.
// Each try is one retire. A try that failed may have done part of its
// work all the same. So the engine is asked what is left of old before the
// next try, which works from that. Each try makes its own bounded contexts.
// Once old is gone, the retirement is done, whatever the errors said. A
// retirement not done after retireTries is an OldLeftError. It says truly
// whether old still runs.
func (x Executor) retireThrough(ctx context.Context, d *Desired, old engine.Container) error {
	err := x.retire(ctx, d, old)
	for try := 1; err != nil; try++ {
		left, lerr := x.settled(CleanupContext(ctx), old.ID)
		switch {
		case engine.IsNotFound(lerr):
			return nil
		case lerr != nil:
			err = errors.Join(err, fmt.Errorf("look up the old %s: %w", d.Name, lerr))
			return &OldLeftError{Name: d.Name, Aside: RetiringName(d.Name), Left: LeftUnknown, Err: err}
		case try == retireTries:
			return &OldLeftError{Name: d.Name, Aside: RetiringName(d.Name), Left: leftState(left), Err: err}
		}
		err = x.retire(ctx, d, left)
	}
	return nil
}

// What an OldLeftError says of the old container it left.
const (
	LeftStopped = "stopped"
	LeftRunning = "running"
	LeftUnknown = "unknown" // the engine could not say
)

// leftState is what an OldLeftError says of c, as the engine has it.
func leftState(c engine.Container) string {
	if c.Running {
		return LeftRunning
	}
	return LeftStopped
}
