package lifecycle

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// stopMargin is how long past a stop's grace period StopThrough waits for
// the engine's answer once its caller was signalled.
const stopMargin = 10 * time.Second

// StopThrough stops container id, giving it timeout to stop gracefully.
// It sees the engine's stop through even if ctx is cancelled meanwhile by
// SIGINT or SIGTERM. A graceful stop, once asked, goes on in the engine. A
// caller that gave up on it would bring back a container that then stops
// for good. Its own context is bounded by the grace period plus
// stopMargin. The caller checks ctx afterwards and brings back what it
// stopped.
func StopThrough(ctx context.Context, eng engine.Client, id string, timeout time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx) // not asked yet: nothing to see through
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(timeout, 0)+stopMargin)
	defer cancel()
	return eng.Stop(sctx, id, timeout)
}
