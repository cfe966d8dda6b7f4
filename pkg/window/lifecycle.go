package window

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// window is one window's progress from open to close.
type window struct {
	d    *state.Dir
	eng  engine.Client
	opts Options
	*plan
	id string
	// scope is the state directory's ID (apply.LabelManaged).
	scope string

	hold     *holds.Hold
	openedAt time.Time
	openErr  error

	stepStart time.Time
	stepEnd   time.Time
	stepCode  *int
	stepErr   error
	result    string
}

// runStep runs the step, killed past the timeout or on a signal.
func (w *window) runStep(ctx context.Context) {
	stepCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	w.stepStart = time.Now()
	w.opts.Progress("step %s started (timeout %s)\n", w.step, w.timeout)
	var code int
	var err error
	if w.def.Run != nil {
		code, err = w.runContainer(stepCtx)
	} else {
		code, err = w.runExec(stepCtx)
	}
	w.stepEnd = time.Now()
	// A kill that failed must not be hidden behind "timeout" or
	// "interrupted"; the context's own error says nothing new.
	var also error
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		also = err
	}
	switch {
	case ctx.Err() != nil:
		w.result, w.stepErr = ResultInterrupted, errors.Join(fmt.Errorf("step %s interrupted", w.step), also)
	case stepCtx.Err() != nil:
		w.result, w.stepErr = ResultTimeout, errors.Join(fmt.Errorf("step %s killed after its timeout of %s", w.step, w.timeout), also)
	case err != nil:
		w.result, w.stepErr = ResultFailed, fmt.Errorf("step %s: %w", w.step, err)
	case code != 0:
		w.result, w.stepErr = ResultFailed, fmt.Errorf("step %s exited %d", w.step, code)
	default:
		w.result = ResultOK
	}
	took := w.stepEnd.Sub(w.stepStart).Round(time.Millisecond)
	// Only an exit status the step really had is recorded: not the -1 of a
	// step that never started or whose container could not be waited for.
	if err != nil || code < 0 {
		w.opts.Progress("step %s ended after %s without an exit status\n", w.step, took)
		return
	}
	w.stepCode = &code
	w.opts.Progress("step %s finished in %s with exit %d\n", w.step, took, code)
}

// stepSupervisor runs an exec: step's argv ("$@", never through a shell's
// parsing) in the background and waits for it. It gets SIGTERM when the
// window's process dies (parent-death signal) and then SIGKILLs its whole
// process group: the step and whatever the step started (a gc.sh whose
// child does the sweep) die with the window.
const stepSupervisor = `trap 'kill -KILL 0' TERM; "$@" & wait $!`

// runExec runs an exec: step on the host: argv, never a shell. The step is
// in its own process group, killed whole on timeout or signal, and killed
// whole if the window's process dies (it must not outlive the window).
func (w *window) runExec(ctx context.Context) (int, error) {
	if _, err := exec.LookPath(w.def.Exec[0]); err != nil {
		return -1, err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", stepSupervisor, w.step}, w.def.Exec...)...)
	cmd.Stdout, cmd.Stderr = w.opts.StepOutput, w.opts.StepOutput
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return -1, err
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err := cmd.Wait()
	close(done)
	// What the step left running in its process group (a daemon it forked)
	// must not go on past the step either.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		// Killed by a signal: 128+signal, as a shell and the engine say
		// (ExitCode is -1 then).
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil
		}
		return exitErr.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}

// runContainer runs a run: step as a one-off container with the held
// containers' volumes, streams its output, and removes it.
func (w *window) runContainer(ctx context.Context) (int, error) {
	spec, err := w.stepSpec()
	if err != nil {
		return -1, err
	}
	name := w.hold.StepContainer
	cleanup := apply.CleanupContext(ctx, cleanupTimeout)
	// A step container left by a window that died has exited by now (its
	// hold was stale, or this window would not have opened): remove it. A
	// container of that name that is not this state directory's step
	// container belongs to someone else (another state directory on the
	// same engine, or nobody's): never touch it.
	old, err := w.eng.Inspect(ctx, name)
	switch {
	case engine.IsNotFound(err):
	case err != nil:
		return -1, fmt.Errorf("inspect %s: %w", name, err)
	case old.Labels[apply.LabelManaged] != w.scope || old.Labels[apply.LabelRole] != apply.RoleStep:
		return -1, fmt.Errorf("a container this state directory's windows do not own is named %s; remove or rename it", name)
	default:
		if err := w.eng.Remove(ctx, old.ID); err != nil && !engine.IsNotFound(err) {
			return -1, fmt.Errorf("remove leftover %s: %w", name, err)
		}
	}
	id, err := w.eng.Create(ctx, name, spec)
	if err != nil {
		return -1, fmt.Errorf("create step container: %w", err)
	}
	defer func() {
		if err := w.eng.Remove(cleanup, id); err != nil {
			w.opts.Progress("remove step container %s: %v\n", name, err)
		}
	}()
	if err := w.eng.Start(ctx, id); err != nil {
		return -1, fmt.Errorf("start step container: %w", err)
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		_ = w.eng.Logs(cleanup, id, w.opts.StepOutput)
	}()
	code, err := w.eng.Wait(ctx, id)
	if ctx.Err() != nil {
		// Timeout or signal: the sweep must stop before the containers
		// come back.
		if kerr := w.eng.Kill(cleanup, id); kerr != nil && !engine.IsNotFound(kerr) {
			return -1, fmt.Errorf("kill step container: %w", kerr)
		}
		code, err = w.eng.Wait(cleanup, id)
	}
	<-logsDone
	return code, err
}

// stepSpec is the one-off container of a run: step. Its image defaults to
// the first held container's, its volumes-from to the held containers, its
// network to none.
func (w *window) stepSpec() (engine.Spec, error) {
	r := w.def.Run
	image := r.Image
	if image == "" {
		if d := w.desired[w.held[0]]; d != nil {
			image = d.Image
		} else if c, err := w.eng.Inspect(context.Background(), w.held[0]); err == nil {
			image = c.Image
		} else {
			return engine.Spec{}, fmt.Errorf("no image for step %s: %s was never applied; set run.image", w.step, w.held[0])
		}
	}
	from := r.VolumesFrom
	if len(from) == 0 {
		from = w.def.WhileStopped
	}
	var volumesFrom []string
	for _, c := range from {
		volumesFrom = append(volumesFrom, mesh.EngineName(w.module, c))
	}
	network := r.Network
	if network == "" {
		network = "none"
	}
	var env []string
	for k, v := range r.Env {
		env = append(env, k+"="+v)
	}
	return engine.Spec{
		Image:       image,
		Entrypoint:  r.Entrypoint,
		Cmd:         r.Command,
		Env:         env,
		Binds:       r.Volumes,
		VolumesFrom: volumesFrom,
		NetworkMode: network,
		Restart:     "no",
		Labels: map[string]string{
			apply.LabelManaged: w.scope,
			apply.LabelRole:    apply.RoleStep,
			apply.LabelModule:  w.module,
			apply.LabelWindow:  w.id,
		},
	}, nil
}
