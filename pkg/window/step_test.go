package window

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// stepEngine is an engine with one step container that runs for runFor
// once started, logging a line a minute. Every call honours its context as
// the Docker client does: a call whose context is done fails. Calls the
// step does not make panic (the embedded nil Client).
type stepEngine struct {
	engine.Client
	runFor  time.Duration
	killErr error // what Kill answers, when not nil
	// images the engine holds; pullErr is what a Pull of any other answers.
	images  map[string]bool
	pullErr error
	pulled  []string

	mu      sync.Mutex
	started bool
	exited  chan struct{}
	kill    chan struct{}
	code    int
	killed  bool
	removed bool
}

func newStepEngine(runFor time.Duration) *stepEngine {
	return &stepEngine{runFor: runFor, exited: make(chan struct{}), kill: make(chan struct{})}
}

func (e *stepEngine) ImagePresent(ctx context.Context, ref string) (bool, error) {
	return e.images[ref], ctx.Err()
}

func (e *stepEngine) Pull(ctx context.Context, ref string, progress io.Writer) error {
	e.pulled = append(e.pulled, ref)
	return e.pullErr
}

func (e *stepEngine) Inspect(ctx context.Context, name string) (engine.Container, error) {
	return engine.Container{}, fmt.Errorf("no such container %s: %w", name, engine.ErrNotFound)
}

func (e *stepEngine) Create(ctx context.Context, name string, spec engine.Spec) (string, error) {
	return "step-id", ctx.Err()
}

func (e *stepEngine) Start(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	e.started = true
	e.mu.Unlock()
	go func() {
		code := 0
		select {
		case <-time.After(e.runFor):
		case <-e.kill:
			code = 137
		}
		e.mu.Lock()
		e.code = code
		e.mu.Unlock()
		close(e.exited)
	}()
	return nil
}

func (e *stepEngine) Logs(ctx context.Context, id string, w io.Writer) error {
	start := time.Now()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.exited:
			return nil
		case now := <-tick.C:
			fmt.Fprintf(w, "swept at minute %d\n", int(now.Sub(start).Minutes()))
		}
	}
}

func (e *stepEngine) Wait(ctx context.Context, id string) (int, error) {
	select {
	case <-ctx.Done():
		return -1, ctx.Err()
	case <-e.exited:
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.code, nil
	}
}

func (e *stepEngine) Kill(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if e.killErr != nil {
		return e.killErr
	}
	select {
	case <-e.exited:
		return errors.New("container is not running")
	default:
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.killed {
		e.killed = true
		close(e.kill)
	}
	return nil
}

func (e *stepEngine) Remove(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.removed = true
	return nil
}

// containerWindow is a window ready to run a run: step on eng.
func containerWindow(eng engine.Client, timeout time.Duration, out io.Writer) *window {
	return &window{
		eng:  eng,
		opts: Options{StepOutput: out, Progress: func(format string, args ...any) { fmt.Fprintf(out, format, args...) }},
		plan: &plan{module: "m", step: "s", timeout: timeout, held: []string{"m.db"},
			def: &mesh.Step{WhileStopped: []string{"db"}, Run: &mesh.RunStep{Image: "gc:1"}}},
		hold: &coord.Hold{StepContainer: StepContainerName("m", "s")},
	}
}

// lockedBuffer is a bytes.Buffer that a log stream may write to while the
// test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestContainerStepOfMinutes: a run: step of 20 minutes,
// in fake time. Its logs flow for its whole life, not for the first five
// minutes; it is killed at its timeout however late that comes; its
// container is removed in the end; and a kill that failed says so.
func TestContainerStepOfMinutes(t *testing.T) {
	t.Run("runs 20m within a 1h timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newStepEngine(20 * time.Minute)
			var out lockedBuffer
			w := containerWindow(eng, time.Hour, &out)
			runStepOf(t, w, context.Background())
			if w.result != ResultOK || w.stepErr != nil || w.stepCode == nil || *w.stepCode != 0 {
				t.Errorf("result %q, error %v, code %v", w.result, w.stepErr, w.stepCode)
			}
			if !strings.Contains(out.String(), "swept at minute 19\n") {
				t.Errorf("the log stream stopped before the step did:\n%s", out.String())
			}
			if !eng.removed {
				t.Error("the step container was left behind")
			}
			if took := w.stepEnd.Sub(w.stepStart); took != 20*time.Minute {
				t.Errorf("the step took %s, want 20m", took)
			}
		})
	})
	t.Run("killed at a 10m timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newStepEngine(20 * time.Minute)
			var out lockedBuffer
			w := containerWindow(eng, 10*time.Minute, &out)
			runStepOf(t, w, context.Background())
			if !eng.killed {
				t.Error("the step container was not killed at its timeout")
			}
			if w.result != ResultTimeout || w.stepErr == nil || !strings.Contains(w.stepErr.Error(), "step s killed after its timeout of 10m0s") {
				t.Errorf("result %q, error %v", w.result, w.stepErr)
			}
			if w.stepCode == nil || *w.stepCode != 137 {
				t.Errorf("code %v, want 137", w.stepCode)
			}
			if !strings.Contains(out.String(), "swept at minute 9\n") {
				t.Errorf("the log stream stopped before the step did:\n%s", out.String())
			}
			if !eng.removed {
				t.Error("the step container was left behind")
			}
			<-eng.exited
		})
	})
	t.Run("interrupted at minute 12", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newStepEngine(20 * time.Minute)
			var out lockedBuffer
			w := containerWindow(eng, time.Hour, &out)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(12*time.Minute, cancel) // SIGTERM from cron's kill
			runStepOf(t, w, ctx)
			if !eng.killed || !eng.removed {
				t.Errorf("killed %v, removed %v: want both", eng.killed, eng.removed)
			}
			if w.result != ResultInterrupted || w.stepErr == nil || strings.Contains(w.stepErr.Error(), "could not be killed") {
				t.Errorf("result %q, error %v", w.result, w.stepErr)
			}
			<-eng.exited
		})
	})
	t.Run("a kill that fails is reported as failed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newStepEngine(20 * time.Minute)
			eng.killErr = errors.New("engine: cannot kill container step-id")
			var out lockedBuffer
			w := containerWindow(eng, 10*time.Minute, &out)
			runStepOf(t, w, context.Background())
			if w.result != ResultTimeout || w.stepErr == nil {
				t.Fatalf("result %q, error %v", w.result, w.stepErr)
			}
			msg := w.stepErr.Error()
			if strings.Contains(msg, "killed after") || !strings.Contains(msg, "could not be killed") || !strings.Contains(msg, "engine: cannot kill container step-id") {
				t.Errorf("error %q: want it to say the kill failed, and why", msg)
			}
			if w.stepCode != nil {
				t.Errorf("code %d recorded for a step that was never seen to end", *w.stepCode)
			}
			<-eng.exited // the fake container runs its 20 minutes out
		})
	})
}

// TestPrepareStep: a step that cannot run is refused
// before anything is stopped: an exec: program that is missing or not
// executable is a usage error (exit 2), a run: image that is neither in the
// engine nor pullable a plain error (exit 1); a missing image is pulled.
func TestPrepareStep(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "gc.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, prog := range []string{"/no/such/program", notExec, "no-such-program-on-path"} {
		w := execWindow([]string{prog, "--all"}, time.Minute, &bytes.Buffer{})
		msg := usageMsg(t, w.prepareStep(context.Background()))
		if !strings.Contains(msg, "step m/s cannot run") || !strings.Contains(msg, prog) || !strings.HasSuffix(msg, "nothing was stopped") {
			t.Errorf("%s: %q", prog, msg)
		}
	}
	if err := execWindow([]string{"/bin/sh", "-c", "true"}, time.Minute, &bytes.Buffer{}).prepareStep(context.Background()); err != nil {
		t.Errorf("/bin/sh: %v", err)
	}

	eng := newStepEngine(0)
	eng.images = map[string]bool{"gc:1": true}
	w := containerWindow(eng, time.Minute, &bytes.Buffer{})
	if err := w.prepareStep(context.Background()); err != nil || len(eng.pulled) != 0 {
		t.Errorf("image present: %v, pulled %v", err, eng.pulled)
	}
	eng.images = nil
	if err := w.prepareStep(context.Background()); err != nil || len(eng.pulled) != 1 || eng.pulled[0] != "gc:1" {
		t.Errorf("image pulled: %v, pulled %v", err, eng.pulled)
	}
	eng.pullErr = errors.New("dial tcp 127.0.0.1:1: connection refused")
	err := w.prepareStep(context.Background())
	var u *fault.Error
	if err == nil || errors.As(err, &u) && u.Kind == fault.BadInput {
		t.Fatalf("image that cannot be had: %v (%T), want a plain error", err, err)
	}
	if want := "step m/s: image gc:1 cannot be had: dial tcp 127.0.0.1:1: connection refused; nothing was stopped"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// TestExecStepBackgroundChild: a step that exits leaving a
// child that holds its output (a daemon it started) ends when it exits, not
// at its timeout, even when the output goes to a buffer (-q) rather than a
// file; a child that left the step's process group (setsid) is not waited
// for either.
func TestExecStepBackgroundChild(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	tests := []struct {
		name   string
		script string
	}{
		{"in the step's process group", `sleep 600 & echo started`},
		{"in a session of its own", `setsid sleep 600 & echo $! > "$0"; echo started`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out lockedBuffer
			w := &window{
				opts: Options{StepOutput: &out, Progress: func(string, ...any) {}},
				plan: &plan{module: "m", step: "s", timeout: 30 * time.Second,
					def: &mesh.Step{Exec: []string{"/bin/sh", "-c", tt.script, pidFile}}},
			}
			t.Cleanup(func() {
				if data, err := os.ReadFile(pidFile); err == nil {
					if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
					os.Remove(pidFile)
				}
			})
			start := time.Now()
			runStepOf(t, w, context.Background())
			if took := time.Since(start); took > outputDrain+5*time.Second {
				t.Errorf("the step took %s: it waited for its child", took)
			}
			if w.result != ResultOK {
				t.Errorf("result %q, error %v", w.result, w.stepErr)
			}
			if !strings.Contains(out.String(), "started\n") {
				t.Errorf("output %q", out.String())
			}
		})
	}
}

// brokenPipe is stderr piped to a reader that died after n writes.
type brokenPipe struct {
	n, writes, after int
}

func (b *brokenPipe) Write(p []byte) (int, error) {
	if b.writes >= b.n {
		b.after++
		return 0, syscall.EPIPE
	}
	b.writes++
	return len(p), nil
}

// TestStepOutputClosed: the step's output destination
// fails (stderr piped to a reader that died): the step still runs to its
// end and succeeds, with all its output drained, and nothing more is
// written to the broken destination.
func TestStepOutputClosed(t *testing.T) {
	dst := &brokenPipe{n: 1}
	w := &window{
		opts: Options{StepOutput: dst, Progress: func(string, ...any) {}},
		plan: &plan{module: "m", step: "s", timeout: 30 * time.Second,
			def: &mesh.Step{Exec: []string{"/bin/sh", "-c", `i=0; while [ $i -lt 20000 ]; do echo "swept blob $i"; i=$((i+1)); done`}}},
	}
	runStepOf(t, w, context.Background())
	if w.result != ResultOK || w.stepCode == nil || *w.stepCode != 0 {
		t.Errorf("result %q, code %v, error %v", w.result, w.stepCode, w.stepErr)
	}
	if dst.after > 1 {
		t.Errorf("%d writes to the destination after it failed", dst.after)
	}

	var s softWriter
	s.w = &brokenPipe{n: 2}
	for i := range 5 {
		if n, err := s.Write([]byte("line\n")); n != 5 || err != nil {
			t.Errorf("write %d: %d, %v: want 5, nil", i, n, err)
		}
	}
	if b := s.w.(*brokenPipe); b.writes != 2 || b.after != 1 {
		t.Errorf("%d writes passed on and %d after the failure: want 2 and 1", b.writes, b.after)
	}
}

// TestTail: -q keeps the tail of the step's output, bounded, and says
// whether it cut anything.
func TestTail(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
		cut    bool
	}{
		{"nothing", nil, "", false},
		{"under the limit", []string{"abc", "de"}, "abcde", false},
		{"exactly the limit", []string{"abcd", "efgh"}, "abcdefgh", false},
		{"over it in small writes", []string{"abc", "def", "ghi", "jkl", "mno", "pqr"}, "kl" + "mnopqr", true},
		{"over it in one write", []string{"0123456789abcdef"}, "89abcdef", true},
		{"a big write after small ones", []string{"xy", "0123456789abcdef", "gh"}, "abcdefgh", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tail := NewTail(8)
			for _, s := range tt.writes {
				if n, err := tail.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("write %q: %d, %v", s, n, err)
				}
			}
			got, cut := tail.Bytes()
			if string(got) != tt.want || cut != tt.cut {
				t.Errorf("Bytes() = %q, %v; want %q, %v", got, cut, tt.want, tt.cut)
			}
		})
	}
	// Memory stays bounded however much is written.
	tail := NewTail(1 << 10)
	line := bytes.Repeat([]byte("x"), 100)
	for range 100000 {
		tail.Write(line)
	}
	if c := cap(tail.buf); c > 4<<10 {
		t.Errorf("kept %d bytes for a tail of 1 KiB", c)
	}
}

// TestElapsedWaitsForQuiet: on a terminal, the step's elapsed time shows
// only while the step has written nothing for elapsedQuiet. Output ends the
// lines a terminal updates in place, so an elapsed line shown among the
// output would be left behind, stale, once a second.
func TestElapsedWaitsForQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var shown []time.Duration // when, since the step's start
		w := &window{plan: &plan{step: "gc", timeout: time.Hour}, stepStart: time.Now()}
		start := w.stepStart
		w.opts.Status = func(item, msg string) {
			mu.Lock()
			defer mu.Unlock()
			shown = append(shown, time.Since(start))
		}
		out := &softWriter{w: io.Discard}
		stop := w.showElapsed(context.Background(), out.lastWrite)
		// 2.5 s of silence, then 10 s of a line every 500 ms, then silence.
		time.Sleep(2500 * time.Millisecond)
		for range 20 {
			out.Write([]byte("marking\n"))
			time.Sleep(500 * time.Millisecond)
		}
		time.Sleep(10 * time.Second)
		stop()

		mu.Lock()
		defer mu.Unlock()
		var during, after int
		for _, at := range shown {
			switch {
			case at < 2500*time.Millisecond:
				// before any output: shown at once
			case at < 12*time.Second+elapsedQuiet: // the last line is written at 12 s
				during++
			default:
				after++
			}
		}
		if during > 0 {
			t.Errorf("the elapsed time showed %d times among the step's output (at %v)", during, shown)
		}
		if after == 0 || len(shown) == after {
			t.Errorf("the elapsed time did not show before the output or once the step was quiet again (at %v)", shown)
		}
	})
}
