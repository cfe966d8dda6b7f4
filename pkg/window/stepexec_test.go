package window

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// canary is a secret's value that must never reach a step.
const canary = "CANARY-7f3a9c-never-shown"

// outputWindow is execWindow with only the step's output in out.
func outputWindow(argv []string, timeout time.Duration, out *bytes.Buffer) *window {
	w := execWindow(argv, timeout, out)
	w.opts.Progress = func(string, ...any) {}
	return w
}

// TestExecStepEnv: an exec: step gets the documented
// minimal environment, never meshctl's own: not the ledger password, not
// DOCKER_HOST, not meshctl's PATH.
func TestExecStepEnv(t *testing.T) {
	t.Setenv("MESHCTL_LEDGER_PASSWORD", canary)
	t.Setenv("MESHCTL_LEDGER_USER", "alice")
	t.Setenv("DOCKER_HOST", "unix:///"+canary)
	t.Setenv("CI_JOB_TOKEN", canary)
	t.Setenv("PATH", "/"+canary+":"+os.Getenv("PATH"))
	t.Setenv("HOME", "/home/op")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("TZ", "UTC")
	os.Unsetenv("LC_ALL")
	var out bytes.Buffer
	w := outputWindow([]string{"/usr/bin/env"}, time.Minute, &out)
	runStepOf(t, w, context.Background())
	if w.result != ResultOK {
		t.Fatalf("result %q, %v", w.result, w.stepErr)
	}
	if strings.Contains(out.String(), canary) {
		t.Errorf("the step saw meshctl's secrets:\n%s", out.String())
	}
	var got []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "=") {
			got = append(got, line)
		}
	}
	slices.Sort(got)
	want := []string{"HOME=/home/op", "LANG=C.UTF-8", "PATH=" + StepPath, "TZ=UTC"}
	if !slices.Equal(got, want) {
		t.Errorf("step environment %q, want exactly %q", got, want)
	}
}

// TestExecStepArgv: exec: is argv, exec'd as it is: echo
// is the program found on the step's PATH (not a shell's builtin, which
// would read the backslashes), its argument printed literally; the step's
// parent is the window itself.
func TestExecStepArgv(t *testing.T) {
	echo, err := lookStepPath("echo")
	if err != nil {
		t.Skipf("no echo program on %s: %v", StepPath, err)
	}
	var out bytes.Buffer
	w := outputWindow([]string{"echo", `a\tb \c END`}, time.Minute, &out)
	runStepOf(t, w, context.Background())
	if w.result != ResultOK {
		t.Fatalf("result %q, %v", w.result, w.stepErr)
	}
	if got, want := out.String(), `a\tb \c END`+"\n"; got != want {
		t.Errorf("%s printed %q, want %q: the argument was not passed as it is", echo, got, want)
	}

	// $PPID of the step is this process: no shell in between.
	out.Reset()
	w = outputWindow([]string{"/bin/sh", "-c", "echo $PPID"}, time.Minute, &out)
	runStepOf(t, w, context.Background())
	if got := strings.TrimSpace(out.String()); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("the step's parent is %s, want the window %d", got, os.Getpid())
	}
}

// TestLookStepPath: a bare name is looked for on StepPath, never on
// meshctl's PATH; a name with a slash is that file.
func TestLookStepPath(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "only-here")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	if p, err := lookStepPath("only-here"); err == nil {
		t.Errorf("found %s on meshctl's PATH", p)
	} else if !strings.Contains(err.Error(), "not found in the step's PATH") {
		t.Errorf("error %v", err)
	}
	if p, err := lookStepPath(prog); err != nil || p != prog {
		t.Errorf("lookStepPath(%s) = %s, %v", prog, p, err)
	}
	if p, err := lookStepPath("sh"); err != nil || !strings.HasSuffix(p, "/sh") {
		t.Errorf("lookStepPath(sh) = %s, %v", p, err)
	}
}

// TestExecStepGuard: the window's process dying (its pipe to the guard
// closed, as a SIGKILL closes it) kills the step's whole process group at
// once: the step and the child it started.
func TestExecStepGuard(t *testing.T) {
	g, err := startGuard()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cmdErr := make(chan error, 1)
	go func() {
		// The step, in the guard's group, as runExec starts it.
		p, err := os.StartProcess("/bin/sh", []string{"sh", "-c", `sleep 60 & echo $! > "$0"; wait`, pidFile},
			&os.ProcAttr{Sys: &syscall.SysProcAttr{Setpgid: true, Pgid: g.pgid}})
		if err != nil {
			cmdErr <- err
			return
		}
		_, err = p.Wait()
		cmdErr <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	var pid int
	for {
		if data, err := os.ReadFile(pidFile); err == nil && strings.HasSuffix(string(data), "\n") {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the step did not start its child")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The window "dies": only its end of the pipe goes away.
	g.hold.Close()
	select {
	case <-cmdErr:
	case <-time.After(3 * time.Second):
		t.Fatal("the step outlived its window")
	}
	_ = g.cmd.Wait()
	deadline = time.Now().Add(3 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the step's child %d outlived its window", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runStepOf runs w's step as Run does: an exec: step's guard is started
// first (as prepareStep does), then the step.
func runStepOf(t *testing.T, w *window, ctx context.Context) {
	t.Helper()
	if w.def.Run == nil {
		g, err := startGuard()
		if err != nil {
			t.Fatal(err)
		}
		w.guard = g
		defer g.stop()
	}
	w.runStep(ctx)
}
