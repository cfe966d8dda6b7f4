package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
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

// SilentError carries an exit status whose explanation the command has
// already printed (a window whose step failed, an apply with a failed
// container): Main prints nothing more.
type SilentError struct{ Code int }

func (e *SilentError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// ExitCode returns the carried status.
func (e *SilentError) ExitCode() int { return e.Code }

// Main runs meshctl with the process's arguments and returns its exit status.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return Run(ctx, NewEnv(os.Stdin, os.Stdout, os.Stderr), os.Args[1:])
}

// Run runs meshctl with args in env and returns its exit status. Each error
// is printed once, here.
func Run(ctx context.Context, env *Env, args []string) int {
	root := newRootCmd(env)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(ctx, err)
	var silent *SilentError
	if !errors.As(err, &silent) {
		fmt.Fprintf(env.Stderr, "meshctl: %v\n", err)
		var usage *UsageError
		if errors.As(err, &usage) && usage.Cmd != "" {
			fmt.Fprintf(env.Stderr, "Run '%s --help' for usage.\n", usage.Cmd)
		}
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
		strings.HasPrefix(err.Error(), "unknown shorthand flag"):
		// cobra's own usage errors are untyped.
		return exitUsage
	default:
		return exitFailed
	}
}
