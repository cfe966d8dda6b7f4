package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/term"
)

// Exit statuses of CONTRACT §3.
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitBusy        = 3
	exitConflict    = 4
	exitInterrupted = 130
)

// UsageError is a mistake in how meshctl was called (exit 2); it is the only
// error printed with a pointer to the command's usage.
type UsageError struct {
	Err error
	Cmd string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// exitCoder is implemented by the typed errors of the domain packages
// (state.BusyError → 3, mesh.DecodeError → 2, ledger.ConflictError → 4 …).
type exitCoder interface{ ExitCode() int }

// Main runs meshctl with the process's arguments and returns its exit status.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A reader that goes away (meshctl … | head -1, a log shipper that dies)
	// must not kill meshctl mid-apply or mid-window: with SIGPIPE notified,
	// a write to the closed pipe returns EPIPE instead. Notified, not
	// ignored: an ignored signal would stay ignored in the programs meshctl
	// execs, a notified one is reset to its default there. The channel is
	// never read; a full one drops the signal.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	stdout, stderr := &outputWriter{w: os.Stdout}, &outputWriter{w: os.Stderr}
	env := NewEnv(os.Stdin, stdout, stderr)
	env.StderrFd = os.Stderr.Fd()
	env.StderrTTY = term.IsTerminal(int(env.StderrFd))
	defer watchInterrupt(ctx, env, stdout, stderr, os.Exit)()
	code := Run(ctx, env, os.Args[1:])
	// The exit status is the work's: results that could not be written do
	// not undo an apply that was done. A reader that left (EPIPE) chose to;
	// any other failure is said, if stderr still works.
	if err := stdout.Err(); err != nil && !errors.Is(err, syscall.EPIPE) {
		fmt.Fprintf(stderr, "meshctl: writing the result to stdout: %v\n", err)
	}
	return code
}

// outputWriter is stdout or stderr as the commands see it: a failed write (a
// closed pipe, a full disk) is kept for Main, not returned, so that no
// output error fails or interrupts the work, and later writes are dropped.
// It is safe for concurrent use (an apply's workers report progress).
type outputWriter struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		if _, err := o.w.Write(p); err != nil {
			o.err = err
		}
	}
	return len(p), nil
}

// Err returns the first write error, nil if none.
func (o *outputWriter) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Run runs meshctl with args in env and returns its exit status. Each error
// is printed once, here.
func Run(ctx context.Context, env *Env, args []string) int {
	root := newRootCmd(env)
	root.SetArgs(args)
	env.args = args
	cmd, err := root.ExecuteContextC(ctx)
	env.closeProgress()
	if he := (*helperExit)(nil); errors.As(err, &he) {
		return he.code // the helper said all there was to say
	}
	code := exitOK
	if err != nil {
		// A flag or argument error comes before the pre-run that folds in
		// MESHCTL_* and the config file: fold them in now, so that -o json
		// set there still makes the error a JSON document. A pre-run that
		// failed while folding them in has reported that itself.
		if cmd != nil && !env.preRun {
			_ = loadConfig(cmd)
		}
		fmt.Fprintf(env.Stderr, "meshctl: %v\n", err)
		var usage *UsageError
		if errors.As(err, &usage) && usage.Cmd != "" {
			fmt.Fprintf(env.Stderr, "Run '%s --help' for usage.\n", usage.Cmd)
		}
		code = exitCode(ctx, err)
	}
	if env.JSON() {
		// One document, whatever happened: the result, the error, or both.
		env.Stdout.Write(jsonDocument(env.jsonResult, err, code))
	}
	return code
}

// exitCode maps an error to the exit status of CONTRACT §3; this is the one
// place that does.
func exitCode(ctx context.Context, err error) int {
	var (
		usage *UsageError
		coder exitCoder
	)
	switch {
	case errors.As(err, &usage):
		return exitUsage
	case errors.As(err, &coder):
		return coder.ExitCode()
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return exitInterrupted
	case strings.HasPrefix(err.Error(), "unknown command"),
		strings.HasPrefix(err.Error(), "unknown flag"),
		strings.HasPrefix(err.Error(), "unknown shorthand flag"),
		strings.HasPrefix(err.Error(), "if any flags in the group"),
		strings.HasPrefix(err.Error(), "at least one of the flags in the group"),
		strings.HasPrefix(err.Error(), "required flag"):
		// cobra's own usage errors are untyped: those of flag groups
		// (--quiet with --verbose) do not pass through SetFlagErrorFunc.
		return exitUsage
	default:
		return exitFailed
	}
}
