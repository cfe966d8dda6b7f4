package window

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// StepPath is the PATH of an exec step, whatever meshctl's own PATH is.
// Cron's PATH and a CI job's differ, and a step must find the same program
// under both.
const StepPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stepPassed are the variables of meshctl's environment an exec step gets,
// each only when set. They say where home is, and how to print text and
// times. None of them is a secret.
var stepPassed = []string{"HOME", "LANG", "LC_ALL", "TZ"}

// stepEnv is the whole environment of an exec step. It is PATH=StepPath,
// and stepPassed as meshctl has them in getenv. Nothing else of meshctl's
// environment reaches a step. MESHCTL_LEDGER_PASSWORD and DOCKER_HOST do
// not, nor does whatever a CI job or an operator's shell exported.
func stepEnv(getenv func(string) string) []string {
	env := []string{"PATH=" + StepPath}
	for _, k := range stepPassed {
		if v := getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// lookStepPath finds an exec step's program as the step's environment
// would. A name with a slash is that file. Any other name is looked for on
// StepPath, never on meshctl's PATH.
func lookStepPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	var firstErr error
	for _, dir := range filepath.SplitList(StepPath) {
		p, err := exec.LookPath(filepath.Join(dir, name))
		if err == nil {
			return p, nil
		}
		if firstErr == nil && !errors.Is(err, os.ErrNotExist) {
			firstErr = err // there, but not executable: say so
		}
	}
	if firstErr != nil {
		return "", firstErr
	}
	return "", fmt.Errorf("exec: %q: executable file not found in the step's PATH (%s)", name, StepPath)
}

// guardArg0 is the name meshctl runs itself under as an exec step's guard.
const guardArg0 = "meshctl-step-guard"

// MaybeStepGuard runs this process as a step's guard when startGuard made it.
// It returns only when the process is something else.
// A main calls it first. That is meshctl's main, and the TestMain of each
// package whose tests run exec steps, which re-run their own binary as the guard.
func MaybeStepGuard() {
	if filepath.Base(os.Args[0]) == guardArg0 {
		runGuard()
	}
}

// runGuard is the body of a step's guard. The guard leads the step's
// process group and reads its stdin until EOF. Only the window holds that
// pipe open. So EOF means the window ended or died. A SIGKILL runs no
// cleanup, but it does close the pipe. The guard then kills its whole
// group, the step and whatever the step started, itself included.
func runGuard() {
	// A signal to the group, such as the step's own kill 0, must not end
	// the guard before the step. Only the window's end does.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = syscall.Kill(0, syscall.SIGKILL)
	os.Exit(0)
}

// guard is a running step guard.
type guard struct {
	cmd  *exec.Cmd
	pgid int
	// hold is the pipe's write end. The guard reads EOF once it is closed,
	// by stop or by the window's process dying.
	hold    *os.File
	stopped bool
}

// startGuard starts meshctl again as a step guard (runGuard), in a new
// process group for the step to join. A shell supervisor would do, but the
// step's argv must never pass through a shell. A guard that is not the
// step's parent leaves the step its own exit status. The window stays the
// step's parent.
func startGuard() (*guard, error) {
	// Use /proc/self/exe, not os.Executable. It is the binary this process
	// runs, even if an upgrade has replaced the file meanwhile.
	const self = "/proc/self/exe"
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := &exec.Cmd{
		Path: self,
		// The guard ignores its arguments. A test binary whose TestMain
		// forgot MaybeStepGuard reads this one and runs no test. Else each
		// guard would run the tests again, and start guards of its own.
		Args:  []string{guardArg0, "-test.run=^$"},
		Env:   []string{},
		Stdin: r,
		// Its own process group, which the step joins. No output, since a
		// guard must not hold the step's output open.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return nil, err
	}
	return &guard{cmd: cmd, pgid: cmd.Process.Pid, hold: w}, nil
}

// stop ends the guard, and with it whatever is left of the step's process
// group. A nil guard, or one stopped already, is left as it is.
func (g *guard) stop() {
	if g == nil || g.stopped {
		return
	}
	g.stopped = true
	g.hold.Close()
	_ = g.cmd.Wait()
}
