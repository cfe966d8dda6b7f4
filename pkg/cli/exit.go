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

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/spf13/cobra"
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

// UsageError is a mistake in how meshctl was called (exit 2). It is the
// only error printed with a pointer to the command's usage.
type UsageError struct {
	Err error
	Cmd string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// faultError is implemented by the typed errors of meshctl's packages. Each
// says its kind of failure, never a number. For example, state.BusyError
// says fault.Busy, mesh.DecodeError fault.BadInput, and ledger.ConflictError
// fault.Conflict.
type faultError interface{ Fault() fault.Kind }

// Main runs meshctl with the process's arguments and returns its exit status.
func Main() int {
	// SIGHUP too. An SSH session that drops must not kill a window with its
	// containers held. Every command cleans up and exits 130 as for SIGTERM.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// A reader may go away, as in meshctl … | head -1, or a log shipper
	// that dies. That must not kill meshctl mid-apply or mid-window. With
	// SIGPIPE notified, a write to the closed pipe returns EPIPE instead.
	// It is notified, not ignored. An ignored signal would stay ignored in
	// the programs meshctl execs, while a notified one is reset to its
	// default there. The channel is never read, and a full one drops the signal.
	sigpipe := make(chan os.Signal, 1)
	signal.Notify(sigpipe, syscall.SIGPIPE)
	defer signal.Stop(sigpipe)
	stdout, stderr := &outputWriter{w: os.Stdout}, &outputWriter{w: os.Stderr}
	env := NewEnv(os.Stdin, stdout, stderr)
	env.StderrFd = os.Stderr.Fd()
	env.StderrTTY = term.IsTerminal(int(env.StderrFd))
	defer watchInterrupt(ctx, env, stdout, stderr, os.Exit)()
	code := Run(ctx, env, os.Args[1:])
	// The exit status is the work's. Results that could not be written do
	// not undo an apply that was done. A reader that left (EPIPE) chose to.
	// Any other failure is said, if stderr still works.
	if err := stdout.Err(); err != nil && !errors.Is(err, syscall.EPIPE) {
		fmt.Fprintf(stderr, "meshctl: writing the result to stdout: %v\n", err)
	}
	return code
}

// outputWriter is stdout or stderr as the commands see it. A failed write,
// to a closed pipe or a full disk, is kept for Main, not returned. So no
// output error fails or interrupts the work, and later writes are dropped.
// It is safe for concurrent use, since an apply's workers report progress.
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
	env.writeMetrics(cmd)
	if he := (*helperExit)(nil); errors.As(err, &he) {
		return he.code // the helper said all there was to say
	}
	code := exitOK
	if err != nil {
		// A flag or argument error comes before the pre-run that folds in
		// MESHCTL_* and the config file. Fold them in now, so that -o json
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
		// One document, whatever happened. It holds the result, the error, or both.
		env.Stdout.Write(jsonDocument(env.jsonResult, err, code))
	}
	return code
}

// exitCode maps an error to the exit status of CONTRACT §3. This is the one
// place that knows the numbers. Every other error says only its kind.
func exitCode(ctx context.Context, err error) int {
	switch errorKind(ctx, err) {
	case fault.BadInput:
		return exitUsage
	case fault.Busy:
		return exitBusy
	case fault.Conflict:
		return exitConflict
	case fault.Interrupted:
		return exitInterrupted
	default:
		return exitFailed
	}
}

// errorKind is the kind of failure err is. A usage error has its own kind.
// Else it is the first kind in err's chain, else interrupted when the
// context was. Else cobra's own usage errors are known by their text.
// Anything else has failed.
func errorKind(ctx context.Context, err error) fault.Kind {
	var (
		usage  *UsageError
		faulty faultError
	)
	switch {
	case errors.As(err, &usage):
		return fault.BadInput
	case errors.As(err, &faulty):
		return faulty.Fault()
	case ctx.Err() != nil || errors.Is(err, context.Canceled):
		return fault.Interrupted
	case strings.HasPrefix(err.Error(), "unknown command"),
		strings.HasPrefix(err.Error(), "unknown flag"),
		strings.HasPrefix(err.Error(), "unknown shorthand flag"),
		strings.HasPrefix(err.Error(), "if any flags in the group"),
		strings.HasPrefix(err.Error(), "at least one of the flags in the group"),
		strings.HasPrefix(err.Error(), "required flag"):
		// cobra's own usage errors are untyped. Those of flag groups, such as
		// --quiet with --verbose, do not pass through SetFlagErrorFunc.
		return fault.BadInput
	default:
		return fault.Failed
	}
}

// newExitCodesTopic is "meshctl help exit-codes". It lists the statuses
// exitCode returns, for every command.
func newExitCodesTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "exit-codes",
		Short: "The exit status of every meshctl command",
		Long: `Every meshctl command exits with one of:

  0    done (an apply that found containers held by a window is done)
  1    failed: the engine refused, is unreachable, or did not answer a
       request within 2 minutes (a stop: its grace period on top; a pull, a
       log or a wait for an exit: not bounded), a step failed, a container
       could not be converged
  2    bad usage or bad input: flags, mesh file, names, unknown ids, a state
       file that cannot be read, a state directory meshctl refuses
  3    busy: the state lock was not had within --lock-timeout, or a window
       on that module is open
  4    conflict: a build recorded twice with different images
  130  interrupted (SIGINT/SIGTERM/SIGHUP), after cleaning up

Errors are printed once, on stderr; stdout carries results only.`,
	}
}
