package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// interruptible runs f and returns what it returns, or ctx's error as soon
// as ctx is done. f cannot be cancelled. It may be a read of a stdin or a
// FIFO that never ends, or a decode of a large file. A signal then ends
// the command at once (exit 130) instead of waiting on f. f must change
// nothing that outlives the process. It is left running, and dies with it.
func interruptible[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("interrupted while %s: %w", what, ctx.Err())
	}
}

// A command interrupted by a signal ends at once where it waits on a
// context. It may be stuck where no signal reaches it, as in an open(2) of
// a FIFO or a read that never ends. Then watchInterrupt ends it, deafAfter
// after the signal, once it has held and taken no state lock for deafQuiet.
const (
	deafAfter = 1500 * time.Millisecond
	deafQuiet = time.Second
	deafPoll  = 100 * time.Millisecond
)

// deaf reports whether an interrupted command is stuck at now, rather than
// cleaning up. It is stuck when the signal came deafAfter ago or more, and
// since deafQuiet the command has held no state lock and taken or released
// none. held and last come from state.LockActivity. A command that holds a
// lock is never cut short. Such a command may be a window bringing its
// containers back, an apply putting them back under its claim, or a record
// waiting for the state lock.
func deaf(now, signalled time.Time, held int64, last time.Time) bool {
	return now.Sub(signalled) >= deafAfter && held == 0 && now.Sub(last) >= deafQuiet
}

// watchInterrupt ends the process, exit 130, when the command goes on deaf
// after ctx is done. It says so on stderr. Under -o json it prints the one
// JSON document, unless the command already printed it. Nothing is
// half-written, since every state file is replaced whole by rename, and
// the command holds no lock. The returned func stops the watch.
func watchInterrupt(ctx context.Context, env *Env, stdout, stderr *outputWriter, exit func(int)) func() {
	printed := &countingWriter{w: stdout.w}
	stdout.w = printed
	stop := make(chan struct{})
	go func() {
		select {
		case <-stop:
			return
		case <-ctx.Done():
		}
		signalled := time.Now()
		t := time.NewTicker(deafPoll)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if held, last := state.LockActivity(); !deaf(now, signalled, held, last) {
					continue
				}
			}
			err := fmt.Errorf("interrupted; the command did not end within %s, stuck where a signal does not reach it (it held no lock: nothing is half-written)", deafAfter)
			stderr.last([]byte("meshctl: " + err.Error() + "\n"))
			if env.JSON() {
				stdout.lastIf(func() bool { return printed.n == 0 }, jsonDocument(nil, err, exitInterrupted))
			} else {
				stdout.last(nil)
			}
			exit(exitInterrupted)
			return
		}
	}()
	return func() { close(stop) }
}

// countingWriter counts what went through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// errSealed is an outputWriter's error once last has written its last
// words. Every later write is dropped.
var errSealed = errors.New("output sealed: the process is exiting")

// last writes p, unless an earlier write failed, and drops every write
// after it.
func (o *outputWriter) last(p []byte) { o.lastIf(func() bool { return true }, p) }

// lastIf is last, with p written only if ok says so, under the writer's lock.
func (o *outputWriter) lastIf(ok func() bool, p []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil && len(p) > 0 && ok() {
		_, _ = o.w.Write(p)
	}
	if o.err == nil {
		o.err = errSealed
	}
}
