package lifecycle

import (
	"context"
	"time"
)

// SignalGrace bounds the cleanup that runs after a signal. That cleanup
// puts an old container back, or releases a stale hold. Or a window's
// close brings its containers back. An engine call that hangs must not
// keep a signalled command alive for minutes. Past SignalGrace the cleanup
// gives up where it is. It may leave a dead claim, a container aside, or a
// hold kept. The next apply or window heals each of them.
const SignalGrace = 5 * time.Second

type cleanupKey struct{}

// Cleanup returns a context for work that must happen even after ctx is
// cancelled by a signal. It is bounded by d from now. It is also bounded by
// SignalGrace from the later of ctx's cancellation and now. Given a context
// Cleanup made, it starts from that one's own parent, with bounds of its
// own. So the put-back after a health wait that a signal cut short still
// gets its SignalGrace. Make it at the moment of the cleanup, never
// earlier.
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
