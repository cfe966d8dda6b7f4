package window

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// Bounds of what a step's end does with the engine and its output. Each is
// counted from the moment that operation starts, never from the step's
// start. A step of hours must still be killed, waited for and removed.
const (
	killTimeout     = 30 * time.Second
	killWaitTimeout = time.Minute
	removeTimeout   = time.Minute
	// outputDrain is how long the step's output may still flow once the
	// step has ended. What a child left holding it writes is not waited for.
	outputDrain = 5 * time.Second
)

// killError is a step past its timeout, or interrupted, whose container
// could not be killed, or was not seen to stop once killed. It may still run.
type killError struct {
	err    error
	killed bool // the kill succeeded; the wait that followed did not
}

func (e *killError) Error() string {
	if e.killed {
		return "its container was killed but not seen to stop: " + e.err.Error()
	}
	return "its container could not be killed: " + e.err.Error()
}

func (e *killError) Unwrap() error { return e.err }

// prepareStep makes the step ready to run, before anything is stopped. It
// checks the step (checkStep), then starts an exec step's guard or pulls a
// run step's absent image. A window never stops what its step cannot bring
// through. It takes no lock, since a pull may take minutes.
func (w *window) prepareStep(ctx context.Context) error {
	c, err := w.checkStep(ctx)
	if err != nil {
		return err
	}
	if w.def.Run == nil {
		g, err := startGuard()
		if err != nil {
			return fmt.Errorf("start the step's guard: %w; nothing was stopped", err)
		}
		w.guard = g
		return nil
	}
	if c.present {
		return nil
	}
	w.opts.Progress("pulling %s for step %s\n", c.image, w.step)
	if err := w.eng.Pull(ctx, c.image, nil); err != nil {
		return w.unobtainable(c.image, err)
	}
	return nil
}

// stepCheck is what checkStep found of a step.
type stepCheck struct {
	image   string // a run step's image, "" for an exec step
	present bool   // the engine has image
}

// checkStep checks that the step can run, and changes nothing. An exec
// step's program must exist and be executable, else it returns a
// fault.BadInput error, exit 2. A run step's image is looked up, and an
// engine that cannot say fails it, exit 1. A window's open and its dry run
// both call it.
func (w *window) checkStep(ctx context.Context) (stepCheck, error) {
	if w.def.Run == nil {
		if len(w.def.Exec) == 0 {
			return stepCheck{}, fault.New(fault.BadInput, "step %s/%s has neither run: nor exec:; nothing was stopped", w.module, w.step)
		}
		if _, err := lookStepPath(w.def.Exec[0]); err != nil {
			return stepCheck{}, fault.New(fault.BadInput, "step %s/%s cannot run: %v; nothing was stopped", w.module, w.step, err)
		}
		return stepCheck{}, nil
	}
	spec, err := w.stepSpec(ctx)
	if err != nil {
		return stepCheck{}, fmt.Errorf("%w; nothing was stopped", err)
	}
	present, err := w.eng.ImagePresent(ctx, spec.Image)
	if err != nil {
		return stepCheck{image: spec.Image}, w.unobtainable(spec.Image, err)
	}
	return stepCheck{image: spec.Image, present: present}, nil
}

// unobtainable is a run step refused because its image cannot be had.
func (w *window) unobtainable(image string, err error) error {
	return fmt.Errorf("step %s/%s: image %s cannot be had: %w; nothing was stopped", w.module, w.step, image, err)
}

// runStep runs the step, killed past the timeout or on a signal.
func (w *window) runStep(ctx context.Context) {
	stepCtx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	w.stepStart = time.Now()
	w.opts.Progress("step %s started (timeout %s)\n", w.step, w.timeout)
	// stderr may go away, as a pipe whose reader died. That must neither
	// stop the step's output from draining nor fail the step.
	out := &softWriter{w: w.opts.StepOutput}
	stopElapsed := w.showElapsed(stepCtx, out.lastWrite)
	var code int
	var err error
	if w.def.Run != nil {
		code, err = w.runContainer(stepCtx, out)
	} else {
		code, err = w.runExec(stepCtx, out)
	}
	stopElapsed()
	w.stepEnd = time.Now()
	out.endLine()
	// A kill that failed must not be hidden behind "timeout" or
	// "interrupted". The context's own error says nothing new.
	var also error
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		also = err
	}
	var kerr *killError
	switch {
	case errors.As(err, &kerr) && ctx.Err() != nil:
		w.result, w.stepErr = ResultInterrupted, fmt.Errorf("step %s interrupted, and %w", w.step, err)
	case errors.As(err, &kerr):
		w.result, w.stepErr = ResultTimeout, fmt.Errorf("step %s ran past its timeout of %s, and %w", w.step, w.timeout, err)
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
	// Only an exit status the step really had is recorded. A step that
	// never started, or whose container could not be waited for, has -1,
	// which is not recorded.
	if err != nil || code < 0 {
		w.opts.Progress("step %s ended after %s without an exit status\n", w.step, took)
		return
	}
	w.stepCode = &code
	w.opts.Progress("step %s finished in %s with exit %d\n", w.step, took, code)
}

// status shows item's progress in place, on a terminal.
func (w *window) status(item, msg string) {
	if w.opts.Status != nil {
		w.opts.Status(item, msg)
	}
}

// elapsedQuiet is how long a step must have written nothing before its
// elapsed time shows. Step output ends the lines the terminal updates in
// place. So an elapsed line shown between output would be left behind
// among the output, a stale one each second.
const elapsedQuiet = 3 * time.Second

// showElapsed shows the step's elapsed time on a terminal, once a second.
// It does so while the step has written nothing for elapsedQuiet, and
// lastOutput says when it last did. It stops when the returned func is called.
func (w *window) showElapsed(ctx context.Context, lastOutput func() time.Time) func() {
	if w.opts.Status == nil {
		return func() {}
	}
	item := "step " + w.step
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if time.Since(lastOutput()) < elapsedQuiet {
					continue
				}
				w.status(item, fmt.Sprintf("running for %s (timeout %s)", time.Since(w.stepStart).Round(time.Second), w.timeout))
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// runExec runs an exec step on the host. Its argv is exec'd as it is,
// never through a shell. So an argv[0] that is a shell's builtin name,
// such as echo, runs the program found on the step's PATH. The step gets
// only its own environment (stepEnv). It is in a process group of its
// own, killed whole on timeout or signal. It is also killed whole if the
// window's process dies, by a guard in the group (startGuard). Neither the
// step nor what it started outlives the window.
func (w *window) runExec(ctx context.Context, out io.Writer) (int, error) {
	prog, err := lookStepPath(w.def.Exec[0])
	if err != nil {
		return -1, err
	}
	g := w.guard
	defer g.stop()
	cmd := &exec.Cmd{Path: prog, Args: w.def.Exec, Env: stepEnv(os.Getenv)}
	// The step writes to a pipe of ours, an *os.File. So Wait returns when
	// the step exits. It does not wait, up to the step's timeout, for the
	// last process holding its output, such as a child left in the background.
	pr, pw, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	// In the guard's process group. The parent-death signal also ends the
	// step itself at once should the window die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pgid: g.pgid, Pdeathsig: syscall.SIGKILL}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return -1, err
	}
	w.stepStarted = true
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, pr)
	}()
	defer func() {
		// Killing the group closed most writers. One that left it by setsid
		// is not waited for past outputDrain.
		drain := time.NewTimer(outputDrain)
		defer drain.Stop()
		select {
		case <-copied:
		case <-drain.C:
		}
		pr.Close()
		<-copied
	}()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
		case <-done:
		}
	}()
	err = cmd.Wait()
	close(done)
	// What the step left running in its process group, such as a daemon
	// it forked, must not go on past the step either.
	_ = syscall.Kill(-g.pgid, syscall.SIGKILL)
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		// Killed by a signal, so 128+signal, as a shell and the engine say.
		// ExitCode is -1 then.
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
// containers' volumes, streams its output for its whole life, and removes it.
func (w *window) runContainer(ctx context.Context, out io.Writer) (int, error) {
	spec, err := w.stepSpec(ctx)
	if err != nil {
		return -1, err
	}
	name := w.hold.StepContainer
	if err := w.clearLeftoverStep(ctx, name); err != nil {
		return -1, err
	}
	id, err := w.eng.Create(ctx, name, spec)
	if err != nil {
		return -1, fmt.Errorf("create step container: %w", err)
	}
	defer func() {
		if w.mesh != nil {
			return // its exit says how the step ended, until recorded (recordEnd)
		}
		// Bounded by lifecycle.SignalGrace once ctx is done. A remove that
		// hangs is given up. The container has exited, waited for or killed,
		// and the next window removes it as a leftover.
		rctx, cancel := lifecycle.Cleanup(ctx, removeTimeout)
		defer cancel()
		if err := w.eng.Remove(rctx, id); err != nil && !engine.IsNotFound(err) {
			w.opts.Progress("remove step container %s: %v\n", name, err)
		}
	}()
	if err := w.eng.Start(ctx, id); err != nil {
		return -1, fmt.Errorf("start step container: %w", err)
	}
	w.stepStarted = true
	defer w.followLogs(ctx, id, out)()
	code, err := w.eng.Wait(ctx, id)
	if ctx.Err() == nil {
		return code, err
	}
	return w.stopStep(ctx, id)
}

// clearLeftoverStep removes the step container that a dead window left
// under name. It has exited by now. Its hold was stale, or this window
// would not have opened. A container of that name that is not this
// state directory's step container belongs to someone else. That may be
// another state directory on the same engine, or nobody. It is never touched.
func (w *window) clearLeftoverStep(ctx context.Context, name string) error {
	old, err := w.eng.Inspect(ctx, name)
	switch {
	case engine.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("inspect %s: %w", name, err)
	case !lifecycle.IsStep(old, w.scope):
		return fmt.Errorf("a container this state directory's windows do not own is named %s; remove or rename it", name)
	}
	if err := w.eng.Remove(ctx, old.ID); err != nil && !engine.IsNotFound(err) {
		return fmt.Errorf("remove leftover %s: %w", name, err)
	}
	return nil
}

// followLogs streams the step container's output to out for as long as it
// runs, past a timeout or a signal too. Once the container has been waited
// for, it returns what ends the stream. It lets the last lines drain, for
// outputDrain at most.
func (w *window) followLogs(ctx context.Context, id string, out io.Writer) (end func()) {
	logCtx, stopLogs := context.WithCancel(context.WithoutCancel(ctx))
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		_ = w.eng.Logs(logCtx, id, out)
	}()
	return func() {
		defer stopLogs()
		drain := time.NewTimer(outputDrain)
		defer drain.Stop()
		select {
		case <-logsDone:
		case <-drain.C:
			stopLogs()
			<-logsDone
		}
	}
}

// stopStep kills the step container after a timeout or a signal. The sweep
// must stop before the containers come back. The engine refuses to kill a
// container that has just exited by itself. The wait that follows tells the
// two apart.
func (w *window) stopStep(ctx context.Context, id string) (int, error) {
	kctx, cancel := boundedContext(ctx, killTimeout)
	kerr := w.eng.Kill(kctx, id)
	cancel()
	if engine.IsNotFound(kerr) {
		kerr = nil
	}
	wctx, cancel := boundedContext(ctx, killWaitTimeout)
	code, err := w.eng.Wait(wctx, id)
	cancel()
	switch {
	case err == nil:
		return code, nil
	case kerr != nil:
		return -1, &killError{err: kerr}
	default:
		return -1, &killError{err: err, killed: true}
	}
}

// boundedContext is a context for a cleanup that must happen after ctx is
// done, by a timeout or a signal. It is bounded by d from now.
func boundedContext(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}

// softWriter passes writes on to w until one fails, then discards them. It
// never fails. The step's output keeps draining when its destination is
// gone, and that is not the step's failure.
type softWriter struct {
	mu     sync.Mutex
	w      io.Writer
	err    error
	last   byte      // the last byte written, 0 before any
	lastAt time.Time // when the step last wrote
}

func (s *softWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
	if len(p) > 0 {
		s.last, s.lastAt = p[len(p)-1], time.Now()
	}
	return len(p), nil
}

// lastWrite is when the step last wrote (zero before it has).
func (s *softWriter) lastWrite() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastAt
}

// endLine ends the output's last line if the step left it open, as printf
// without a newline does. So meshctl's next line starts on a line of its
// own.
func (s *softWriter) endLine() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != 0 && s.last != '\n' && s.err == nil {
		_, s.err = s.w.Write([]byte{'\n'})
		s.last = '\n'
	}
}

// Tail keeps the last bytes written to it, at most its limit. The output
// of a step of hours, kept for a failure report, stays bounded.
type Tail struct {
	mu    sync.Mutex
	limit int
	buf   []byte
	cut   bool
}

// NewTail returns a Tail that keeps the last limit bytes.
func NewTail(limit int) *Tail { return &Tail{limit: limit} }

// Write keeps the end of p. It never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if len(p) > t.limit {
		p, t.cut = p[len(p)-t.limit:], true
		t.buf = t.buf[:0]
	}
	t.buf = append(t.buf, p...)
	// Trim at twice the limit, not at each write, to amortise the copies.
	if len(t.buf) > 2*t.limit {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.limit:]...)
		t.cut = true
	}
	return n, nil
}

// String returns a copy of the kept tail, and whether anything before it
// was cut. It may be called while the tail is written to.
func (t *Tail) String() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > t.limit {
		return string(t.buf[len(t.buf)-t.limit:]), true
	}
	return string(t.buf), t.cut
}

// Bytes returns the kept tail, and whether anything before it was cut.
func (t *Tail) Bytes() ([]byte, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.buf) > t.limit {
		return t.buf[len(t.buf)-t.limit:], true
	}
	return t.buf, t.cut
}

// stepSpec is the one-off container of a run step. Its image defaults to
// the first held container's. Its volumes-from defaults to the containers
// held stopped, else to the first held changed. Its network defaults to none.
func (w *window) stepSpec(ctx context.Context) (engine.Spec, error) {
	r := w.def.Run
	image := r.Image
	if image == "" {
		if d := w.desired[w.held[0]]; d != nil {
			image = d.Image
		} else if c, err := w.eng.Inspect(ctx, w.held[0]); err == nil {
			image = c.Image
		} else if ctx.Err() != nil {
			return engine.Spec{}, ctx.Err()
		} else {
			return engine.Spec{}, fmt.Errorf("no image for step %s: %s was never applied; set run.image", w.step, w.held[0])
		}
	}
	from := r.VolumesFrom
	if len(from) == 0 {
		from = w.def.WhileStopped
	}
	if changed := w.def.ChangedNames(); len(from) == 0 && len(changed) > 0 {
		from = changed[:1]
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
			lifecycle.LabelManaged: w.scope,
			lifecycle.LabelRole:    lifecycle.RoleStep,
			lifecycle.LabelModule:  w.module,
			lifecycle.LabelWindow:  w.id,
		},
	}, nil
}
