package lifecycle

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
)

// StepRunning is the one answer, for apply, window and status alike, to
// "does this window's step container still run?": from a listing, a
// container of this state directory (scope) in the step role, running.
func StepRunning(observed []engine.Container, scope string) func(name string) bool {
	running := map[string]bool{}
	for _, c := range observed {
		if IsStep(c, scope) && engine.StateOf(c, time.Time{}) != engine.Stopped {
			running[c.Name] = true
		}
	}
	return func(name string) bool { return running[name] }
}

// Observe lists the state directory's containers in one engine call, as the
// holds.StepsFunc that holds.Liveness.Classify calls after checking every
// window's lock; *observed receives the listing for the caller's plan.
func Observe(ctx context.Context, eng engine.Client, scope string, observed *[]engine.Container) holds.StepsFunc {
	return func() (func(string) bool, error) {
		list, err := eng.List(ctx, Managed(scope))
		if err != nil {
			return nil, err
		}
		*observed = list
		return StepRunning(list, scope), nil
	}
}
