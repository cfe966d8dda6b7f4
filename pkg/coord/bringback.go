package coord

import (
	"context"
	"fmt"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// BringBack ends a hold on container c (CONTRACT §6). It sets c's restart
// policy to policy and starts c. An empty policy means the default. A
// live close and a stale release both call it, so a held container comes
// back one way. It works after a signal too: its context is made here,
// bounded.
func BringBack(ctx context.Context, x lifecycle.Executor, c engine.Container, policy string) error {
	ctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
	defer cancel()
	if policy == "" {
		policy = mesh.DefaultRestart
	}
	// Before the restart policy: a container whose secret is a FIFO now
	// stays stopped, and the engine does not start it either.
	if err := lifecycle.CheckFiles(c.Name, lifecycle.BoundFiles(c)); err != nil {
		return err
	}
	if err := x.EnsureNetworks(ctx, lifecycle.RecordedNetworks(c)); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	if err := x.Engine.SetRestart(ctx, c.ID, policy); err != nil {
		return fmt.Errorf("restore restart policy %s of %s: %w", policy, c.Name, err)
	}
	if err := x.Start(ctx, c); err != nil {
		return fmt.Errorf("start %s: %w", c.Name, err)
	}
	return nil
}
