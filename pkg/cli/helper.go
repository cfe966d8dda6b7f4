package cli

import (
	"context"
	"errors"
	"fmt"
	"github.com/meshctl/meshctl/pkg/fault"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// helperExit is the exit status of a helper program, such as
// meshctl-convert, that wrote its own output, errors and JSON document.
// Run adds nothing.
type helperExit struct{ code int }

func (e *helperExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// helperMissing is a helper program found neither beside meshctl nor on
// PATH (exit 1). The installation lacks it.
func helperMissing(name, dir string) error {
	return fault.New(fault.Failed, "%s is needed for this command and is neither beside meshctl (%s) nor on PATH; "+
		"the release archive ships it, and from a checkout: go build -o %s %s", name, dir, filepath.Join(dir, name), helperSource(name))
}

// helperSource is the package a helper program is built from. meshctl-etcd
// is meshctl itself, built without the tag noetcd.
func helperSource(name string) string {
	if name == etcdHelper {
		return "./cmd/meshctl"
	}
	return "./cmd/" + name
}

// runHelper runs the helper program name with this invocation's arguments,
// on its stdin, stdout and stderr, and returns its exit status. A signal
// from the terminal reaches both. One sent to meshctl alone, by kill PID,
// is passed on as SIGTERM. A helper still running helperGrace later is
// killed. meshctl never waits on a helper deaf to it.
func runHelper(ctx context.Context, env *Env, name string) error {
	path, err := helperPath(name)
	if err != nil {
		return err
	}
	c := exec.CommandContext(ctx, path, env.args...)
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = helperGrace
	c.Stdin, c.Stdout, c.Stderr = env.Stdin, env.Stdout, env.Stderr
	err = c.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee) && ee.ExitCode() >= 0:
		return &helperExit{code: ee.ExitCode()}
	case err != nil:
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// helperGrace is how long a helper has to end once meshctl was signalled.
const helperGrace = time.Second

// helperPath finds the helper program name beside meshctl's own executable,
// as in the release archive's layout, else on PATH.
func helperPath(name string) (string, error) {
	dir := "the directory of meshctl"
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			dir = filepath.Dir(exe)
			p := filepath.Join(dir, name)
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	return "", helperMissing(name, dir)
}
