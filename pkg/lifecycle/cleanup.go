package lifecycle

import (
	"context"
	"time"
)

// SignalGrace bounds the cleanup that runs after a signal (putting an old
// container back, a stale release, a window's close bringing its containers
// back): an engine call that hangs must not keep a signalled command alive
// for minutes. Past it the cleanup gives up where it is; every state it
// can leave (a dead claim, a container aside, a hold kept) is one the next
// apply or window heals.
const SignalGrace = 5 * time.Second

type cleanupKey struct{}

// Cleanup returns a context for work that must happen even after ctx is
// cancelled (a signal), bounded by d from now, and by SignalGrace from the
// later of ctx's cancellation and now. Made from a context Cleanup made, it
// is made from that one's own parent, with bounds of its own: the put-back
// after a health wait that a signal cut short still gets its SignalGrace.
// Make it at the moment of the cleanup, never earlier.
func Cleanup(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if parent, ok := ctx.Value(cleanupKey{}).(context.Context); ok {
		ctx = parent
	}
	c, cancel := context.WithTimeout(context.WithValue(context.WithoutCancel(ctx), cleanupKey{}, ctx), d)
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(SignalGrace, cancel)
		context.AfterFunc(c, func() { t.Stop() })
	})
	return c, func() {
		stop()
		cancel()
	}
}
