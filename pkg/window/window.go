package window

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// Options is one window.
type Options struct {
	Module, Step string
	// File is the mesh file to take the step from. A nil File takes it
	// from the last applied desired state.
	File *mesh.File
	// Timeout overrides the step's timeout when not zero.
	Timeout time.Duration
	// Wait is how long to wait for another window on the module to close.
	Wait time.Duration
	Lock state.LockOptions
	Now  func() time.Time
	// Progress reports what the window does, on stderr.
	Progress func(format string, args ...any)
	// Status, when set on a terminal, shows a held container's or the
	// step's progress on a line of its own, updated in place. It shows the
	// stops, and the step's elapsed time.
	Status func(item, msg string)
	// StepOutput receives the step's stdout and stderr.
	StepOutput io.Writer
	// Settle is how long a held container without a healthcheck must keep
	// running once the close starts it. See lifecycle.Executor.WaitHealthy.
	Settle time.Duration
	// Opened, when set, is called once the window holds its module, before
	// the step runs. By then its lock is taken and its hold recorded. A
	// window that never opened does not call it. window run publishes the
	// window to the mesh there, never while it waits for another window's lock.
	Opened func()
	// Budget takes the module's slot of its max-unavailable before its
	// containers are held stopped. Nil means no etcd ledger. The caller
	// closes it.
	Budget *coord.Budget
	// Gather is the etcd side of mesh windows (mesh: all). Nil means no
	// etcd ledger: a mesh: all step is then refused (exit 2).
	Gather coord.GatherStore
	// Host is this host's name in the mesh (--host-name).
	Host string
}

// BusyError is a window refused because another window on the module is
// open, or its step container from a dead window still runs (exit 3).
type BusyError struct {
	Module string
	Why    string
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("a window on module %s is open: %s; retry later or pass --wait", e.Module, e.Why)
}

// Fault says a busy module is busy.
func (e *BusyError) Fault() fault.Kind { return fault.Busy }

// moduleBusy is a window refused because holder has the module's window
// lock. That is another window's process.
func moduleBusy(module string, holder state.Holder) *BusyError {
	return &BusyError{Module: module, Why: "held by " + holder.String()}
}

// FailedError is a window that closed, but whose step failed or whose
// containers did not all run again (exit 1, or 130 when interrupted).
type FailedError struct {
	Entry       coord.Entry
	Err         error
	Interrupted bool
}

func (e *FailedError) Error() string { return e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// Fault says an interrupted window is interrupted, any other a failure.
func (e *FailedError) Fault() fault.Kind {
	if e.Interrupted {
		return fault.Interrupted
	}
	return fault.Failed
}

// Results of a window, in its history entry.
const (
	ResultOK          = "ok"
	ResultFailed      = "failed"
	ResultTimeout     = "timeout"
	ResultInterrupted = "interrupted"
)

// window is one window's progress from open to close.
type window struct {
	d    *state.Dir
	eng  engine.Client
	opts Options
	*plan
	id string
	// scope is the state directory's ID (lifecycle.LabelManaged).
	scope string

	hold *coord.Hold
	// deferred are the containers whose change an apply reported deferred
	// during this window, as its hold records them. The close reads them.
	deferred []string
	// dependentErrs are why dependents of the held containers were not
	// brought to their deferred change.
	dependentErrs map[string]error
	// missing is why the close could not read the held containers' wish:
	// their own env-file, secret or config. They come back as they were.
	missing  error
	openedAt time.Time
	openErr  error
	// allBack says that the close brought every held container back,
	// running healthy.
	allBack bool

	stepStart time.Time
	stepEnd   time.Time
	stepCode  *int
	stepErr   error
	result    string

	// stepStarted says that the step's process or container started. Only
	// then is there output to keep for window logs.
	stepStarted bool
	// guard leads an exec step's process group. It is started before the
	// hold is recorded, so that the hold names the group (coord.Hold.StepGroup).
	guard *guard
	// mesh is this host's part in a mesh window, nil for a window of
	// this host only.
	mesh *meshPart
}

// plan is what a window will do, resolved before it opens.
type plan struct {
	module, step string
	def          *mesh.Step
	held         []string // engine names
	desired      map[string]*lifecycle.Desired
	timeout      time.Duration
	// budget is the module's max-unavailable, 0 for none.
	budget int
	// hash is the step definition's hash, as the hosts of a mesh window
	// compare it (coord.StepHashes).
	hash string
	// usesMesh says that the module has a mesh: all step. Its windows of
	// this host only then ask etcd whether a mesh window is open.
	usesMesh bool
}

// Run opens a window, runs the step and closes the window. It returns the
// window's history entry, also when the step failed.
func Run(ctx context.Context, d *state.Dir, eng engine.Client, opts Options) (*coord.Entry, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = func(string, ...any) {}
	}
	if opts.StepOutput == nil {
		opts.StepOutput = io.Discard
	}
	p, err := resolve(d, opts)
	if err != nil {
		return nil, err
	}
	if p.def.MeshAll() && opts.Gather == nil {
		return nil, errNoGatherStore(p.module, p.step)
	}
	// The tail of the step's output is kept for meshctl window logs,
	// whatever is done with it live.
	logTail := NewTail(LogLimit)
	tee := &teeWriter{w: opts.StepOutput, tail: logTail}
	opts.StepOutput = tee
	if err := eng.Ping(ctx); err != nil {
		return nil, err
	}
	scope, err := d.ID()
	if err != nil {
		return nil, err
	}

	// One window per module. This lock is held for the window's life.
	waitUntil := time.Now().Add(opts.Wait)
	modLock, err := d.Lock(ctx, coord.ModuleLock(p.module), state.LockOptions{Timeout: opts.Wait, What: "module " + p.module + "'s window lock", Waiting: opts.Lock.Waiting})
	var busy *state.BusyError
	if errors.As(err, &busy) {
		return nil, moduleBusy(p.module, busy.Holder)
	}
	if err != nil {
		return nil, err
	}
	defer modLock.Unlock()

	id := newID(opts.Now())
	// The window's liveness lock, held until the window has closed. A hold
	// whose lock is free belongs to a dead window.
	winLock, err := d.Lock(ctx, coord.WindowLock(id), state.LockOptions{})
	if err != nil {
		return nil, err
	}
	defer func() {
		_ = winLock.RemoveLockFile()
		winLock.Unlock()
	}()

	w := &window{d: d, eng: eng, opts: opts, plan: p, id: id, scope: scope}
	if err := w.refuseBesideGathering(ctx); err != nil {
		return nil, err
	}
	if err := w.prepareStep(ctx); err != nil {
		return nil, err
	}
	defer func() { w.guard.stop() }() // a step that never ran leaves its guard
	if err := w.holdAll(ctx, waitUntil); err != nil {
		return nil, err
	}
	// A signal during the open, as a stop seen through, skips the step.
	if w.openErr == nil && ctx.Err() == nil && w.runner() {
		w.runStepLive(ctx, tee, logTail)
	}
	w.recordEnd(ctx)
	w.awaitEnd(ctx)
	if w.keepsHold() {
		// The step may still run somewhere: nothing comes back.
		err := w.keptError(ctx)
		w.closed(ctx)
		return nil, err
	}
	return w.finish(ctx, logTail)
}

// finish closes the window, keeps its step's log, says so to a mesh
// window's hosts and gives the module's slot back.
func (w *window) finish(ctx context.Context, logTail *Tail) (*coord.Entry, error) {
	entry, err := w.close(ctx)
	if w.openErr == nil && entry != nil && (w.stepStarted || w.mesh != nil && w.mesh.started) {
		w.keepLog(logTail)
	}
	w.closed(ctx)
	w.giveBackSlot(ctx)
	return entry, err
}

// holdAll gathers a mesh window's hosts, takes the slot and opens the
// window, until waitUntil while the module is busy. A window that held
// nothing returns its error. One opened in part records it as openErr,
// and its close brings back what was held.
func (w *window) holdAll(ctx context.Context, waitUntil time.Time) error {
	if err := w.gather(ctx); err != nil {
		return err
	}
	if err := w.takeSlot(ctx); err != nil {
		w.leaveUnheld(ctx, "it did not have its slot: "+err.Error())
		return err
	}
	if err := w.openWaiting(ctx, waitUntil); err != nil {
		if w.hold == nil {
			w.leaveUnheld(ctx, "it held nothing: "+err.Error())
			return err
		}
		// Opened in part. Close what was opened, then report the failure.
		w.openErr = err
		w.failGathering(ctx, "its open failed: "+err.Error())
	}
	if w.opts.Opened != nil {
		w.opts.Opened()
	}
	if w.openErr == nil && ctx.Err() == nil {
		w.openErr = w.markHeld(ctx)
	}
	return nil
}

// takesSlot says whether the window takes a slot of its module's budget.
// A hold of containers stopped takes one, however many it holds. A
// changed hold takes none: the service runs.
func (p *plan) takesSlot() bool { return p.budget > 0 && len(p.def.WhileStopped) > 0 }

// stopped are the engine names of the containers the step holds stopped.
func (p *plan) stopped() []string {
	var out []string
	for _, c := range p.def.WhileStopped {
		out = append(out, mesh.EngineName(p.module, c))
	}
	return out
}

// takeSlot takes the module's slot before anything is held, with no
// state lock held. One not had is the window's refusal, nothing held.
func (w *window) takeSlot(ctx context.Context) error {
	if !w.takesSlot() {
		return nil
	}
	if err := w.opts.Budget.Check([]string{w.module}); err != nil {
		return err
	}
	bound := w.timeout
	for _, n := range w.stopped() {
		bound += lifecycle.ChangeBound(w.desired[n])
	}
	w.opts.Progress("taking a slot of module %s (max-unavailable %d) for %s\n", w.module, w.budget, strings.Join(w.stopped(), ", "))
	if err := w.opts.Budget.Take(ctx, w.module, w.budget, w.stopped(), bound); err != nil {
		return fmt.Errorf("nothing held: %w", err)
	}
	return nil
}

// giveBackSlot gives the module's slot back once the window closed with
// every held container running healthy again, whatever its step did. Else
// the slot stays, and the next apply gives it back once the module runs
// healthy.
func (w *window) giveBackSlot(ctx context.Context) {
	if !w.takesSlot() || !w.allBack {
		return
	}
	if err := w.opts.Budget.GiveBack(ctx, []string{w.module}); err != nil {
		w.opts.Progress("warning: %v\n", err)
	}
}

// runStepLive runs the step with its output so far in sight, in
// window-logs/ID.live. The step's output reaches it through tee.
func (w *window) runStepLive(ctx context.Context, tee *teeWriter, tail *Tail) {
	live := newLiveLog(w.d, w, tail)
	tee.setLive(live)
	live.start()
	w.runStep(ctx)
	tee.setLive(nil)
	live.end()
}

// keepLog keeps the tail of the step's output beside the history, for
// meshctl window logs. A log that cannot be kept is said, and fails
// nothing, since the window has closed.
func (w *window) keepLog(tail *Tail) {
	out, cut := tail.Bytes()
	// A fresh, bounded context, since the window may be closing after a signal.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := &Log{ID: w.id, Module: w.module, Step: w.step, Truncated: cut, Output: string(out)}
	if w.mesh != nil {
		l.Gathering, l.Runner = w.mesh.joined.ID, w.mesh.joined.Runner
	}
	lockOpts := w.opts.Lock
	lockOpts.Timeout = max(lockOpts.Timeout, 10*time.Second)
	if err := saveLog(ctx, w.d, lockOpts, l); err != nil {
		w.opts.Progress("warning: the step log of window %s was not kept: %v\n", w.id, err)
	}
}

// openWaiting opens the window, trying again until waitUntil while the
// module is busy. A dead window's step container still sweeping keeps the
// module busy without holding its lock. --wait waits for it too. A context
// cancelled while it waits is its error.
func (w *window) openWaiting(ctx context.Context, waitUntil time.Time) error {
	for {
		err := w.open(ctx)
		var busy *BusyError
		if !errors.As(err, &busy) || w.hold != nil || !time.Now().Before(waitUntil) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Second, time.Until(waitUntil))):
		}
	}
}

// resolve finds the step and the held containers' desired state.
func resolve(d *state.Dir, opts Options) (*plan, error) {
	a, ok, err := record.LoadApplied(d)
	if err != nil {
		return nil, err
	}
	file := opts.File
	if file == nil {
		if !ok || a.File == nil {
			return nil, fault.New(fault.BadInput, "nothing was applied in %s yet, so step %s/%s is unknown: pass -f FILE or run meshctl apply first", d.Path(), opts.Module, opts.Step)
		}
		file = a.File
	}
	m, ok2 := file.Modules[opts.Module]
	if !ok2 {
		return nil, fault.New(fault.BadInput, "module %q is not in the mesh file%s (it has: %v)", opts.Module, didYouMean(opts.Module, file.ModuleNames()), file.ModuleNames())
	}
	def, ok2 := m.Steps[opts.Step]
	if !ok2 {
		steps := slices.Sorted(maps.Keys(m.Steps))
		has := "it has no steps"
		if len(steps) > 0 {
			has = "its steps: " + strings.Join(steps, ", ")
		}
		return nil, fault.New(fault.BadInput, "module %s has no step %q%s (%s)", opts.Module, opts.Step, didYouMean(opts.Step, steps), has)
	}
	p := &plan{module: opts.Module, step: opts.Step, def: def, desired: map[string]*lifecycle.Desired{}, timeout: def.TimeoutOrDefault(),
		budget: m.Budget(), hash: coord.StepHashes(m)[opts.Step], usesMesh: len(m.MeshSteps()) > 0}
	if opts.Timeout > 0 {
		p.timeout = opts.Timeout
	}
	for _, c := range def.Held() {
		p.held = append(p.held, mesh.EngineName(opts.Module, c))
	}
	if ok {
		desired, _, err := a.DesiredFor(d, opts.Module) // only this module's own files count
		if err != nil {
			return nil, err
		}
		for i := range desired {
			if slices.Contains(p.held, desired[i].Name) {
				p.desired[desired[i].Name] = &desired[i]
			}
		}
	}
	return p, nil
}

// didYouMean is `; did you mean "x"?` for the candidate nearest to word,
// or "" when none is near.
func didYouMean(word string, candidates []string) string {
	if s := mesh.Suggest(word, candidates); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return ""
}

func newID(now time.Time) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return "w-" + now.UTC().Format("20060102T150405") + "-" + hex.EncodeToString(b)
}

// StepContainerName is the deterministic engine name of a run step's
// one-off container. It has two dots, so it never clashes with a service
// container's "module.container".
func StepContainerName(module, step string) string {
	return "meshctl-window." + module + "." + step
}
