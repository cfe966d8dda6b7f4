package enginetest

import (
	"context"
	"fmt"

	"github.com/meshctl/meshctl/pkg/engine"
)

type health struct {
	status, output string
}

// SetHealth makes every running container of image ref report a health
// status. status is starting, healthy or unhealthy, and output is its last
// probe's, as the engine's inspect gives them. A container is judged by it
// only if it was created with a Healthcheck, which Inspect reports.
func (f *Fake) SetHealth(ref, status, output string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.health == nil {
		f.health = map[string]health{}
	}
	f.health[ref] = health{status, output}
}

// addHealth fills in c's health. The caller holds f.mu.
func (f *Fake) addHealth(c *engine.Container) {
	if h, ok := f.health[c.Image]; ok && c.Running {
		c.Health, c.HealthOutput = h.status, h.output
	}
	if fc, ok := f.ctrs[c.ID]; ok && fc.Spec.Healthcheck != nil {
		hc := *fc.Spec.Healthcheck
		c.Healthcheck = &hc
	}
}

// Tail returns a line naming the container, since the fake keeps no logs.
func (f *Fake) Tail(ctx context.Context, id string, lines int) (string, error) {
	unlock, err := f.begin(ctx, OpLogs, id)
	if err != nil {
		return "", err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("log of %s\n", c.Name), nil
}
