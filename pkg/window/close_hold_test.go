package window

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// backEngine holds a few stopped service containers; Start fails where
// startErr says. Any call it does not implement panics (nil interface).
type backEngine struct {
	engine.Client
	mu       sync.Mutex
	ctrs     map[string]*engine.Container
	startErr map[string]error
}

func newBackEngine(scope string, names ...string) *backEngine {
	e := &backEngine{ctrs: map[string]*engine.Container{}, startErr: map[string]error{}}
	for _, n := range names {
		e.ctrs[n] = &engine.Container{ID: "id-" + n, Name: n, RestartPolicy: "no",
			Labels: map[string]string{lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService}}
	}
	return e
}

func (e *backEngine) find(id string) *engine.Container {
	for _, c := range e.ctrs {
		if c.ID == id || c.Name == id {
			return c
		}
	}
	return nil
}

func (e *backEngine) List(context.Context, map[string]string) ([]engine.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engine.Container
	for _, c := range e.ctrs {
		out = append(out, *c)
	}
	return out, nil
}

func (e *backEngine) SetRestart(_ context.Context, id, policy string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.find(id).RestartPolicy = policy
	return nil
}

func (e *backEngine) Start(_ context.Context, id string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.find(id)
	if err := e.startErr[c.Name]; err != nil {
		return err
	}
	c.Running = true
	return nil
}

// closingWindow is a window on store/gc (an exec: step) that held names and
// whose step succeeded, ready to close; its hold is recorded.
func closingWindow(t *testing.T, d *state.Dir, eng engine.Client, scope string, names ...string) *window {
	t.Helper()
	now := time.Date(2026, 11, 29, 3, 30, 0, 0, time.UTC)
	h := coord.Hold{ID: "w-1", Module: "store", Step: "gc", PID: 1, Containers: names,
		Restart: map[string]string{}, OpenedAt: now, Deadline: now.Add(time.Hour)}
	for _, n := range names {
		h.Restart[n] = "always"
	}
	writeHold(t, d, h)
	return &window{d: d, eng: eng, id: "w-1", hold: &h, openedAt: now, result: ResultOK, scope: scope,
		opts: Options{Now: func() time.Time { return now }, Progress: func(string, ...any) {}},
		plan: &plan{module: "store", step: "gc", held: names, def: &mesh.Step{Exec: []string{"true"}},
			desired: map[string]*lifecycle.Desired{}}}
}

// TestCloseKeepsHoldOfWhatDidNotComeBack: a container the close could not
// start is named, the window fails (exit 1), and its hold stays for that
// container alone, so that once the window's process is gone the next apply
// or window releases it the way a close would: the same container started,
// its restart policy restored. The window's history entry is written once.
func TestCloseKeepsHoldOfWhatDidNotComeBack(t *testing.T) {
	d := openTemp(t)
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	eng := newBackEngine(scope, "store.registry", "store.cache")
	eng.startErr["store.registry"] = errors.New("cannot start container: no such network")
	w := closingWindow(t, d, eng, scope, "store.registry", "store.cache")

	entry, err := w.close(context.Background())
	var failed *FailedError
	if !errors.As(err, &failed) || failed.Fault() != fault.Failed {
		t.Fatalf("close: %v, want a failed window (exit 1)", err)
	}
	if !strings.Contains(err.Error(), "store.registry not brought back") {
		t.Errorf("error does not say which container did not come back: %v", err)
	}
	if entry == nil || entry.Result != ResultFailed {
		t.Fatalf("history entry %+v, want result failed", entry)
	}
	if !eng.ctrs["store.cache"].Running || eng.ctrs["store.cache"].RestartPolicy != "always" {
		t.Errorf("store.cache: %+v, want running with its policy restored", *eng.ctrs["store.cache"])
	}
	var hd coord.HoldsDoc
	var hist coord.History
	if _, err := d.Read(coord.HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Read(coord.HistoryFile, &hist); err != nil {
		t.Fatal(err)
	}
	h, ok := hd.Find("w-1")
	if !ok || len(h.Containers) != 1 || h.Containers[0] != "store.registry" {
		t.Fatalf("holds after the close: %+v, want w-1 holding store.registry alone", hd.Holds)
	}

	// The window's process is gone (its lock was never held here): the next
	// apply releases the hold as the close would have.
	delete(eng.startErr, "store.registry")
	classified, _, err := coord.Liveness{Dir: d}.Classify(&hd, time.Now(), func() (func(string) bool, error) {
		return func(string) bool { return false }, nil
	})
	if err != nil || classified[0].State != coord.Stale {
		t.Fatalf("classified %+v, %v; want stale", classified, err)
	}
	lock, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	observed, _ := eng.List(context.Background(), nil)
	ws := &coord.Windows{Holds: hd, History: hist, Classified: classified, Observed: observed}
	released, err := coord.ReleaseStale(context.Background(), lock, lifecycle.Executor{Engine: eng, Scope: scope}, ws,
		map[string]string{}, time.Now(), func(string, ...any) {})
	if err != nil || released != 1 || !runs(ws.Observed, "store.registry") {
		t.Fatalf("release: %d released, %+v, %v", released, ws.Observed, err)
	}
	hd, hist = ws.Holds, ws.History
	if c := eng.ctrs["store.registry"]; !c.Running || c.RestartPolicy != "always" {
		t.Errorf("store.registry after the release: %+v, want running, restart always", *c)
	}
	n := 0
	for _, e := range hist.Windows {
		if e.ID == "w-1" {
			n++
		}
	}
	if n != 1 || len(hd.Holds) != 0 {
		t.Errorf("after the release: %d history entries for w-1 (want 1), holds %+v (want none)", n, hd.Holds)
	}
}

// TestCloseWaitsForTheLockAsDocumented: a close after SIGINT (its context
// cancelled) still waits the whole closeLockWait for a busy state lock, and
// its error names the holder. A cleanup context made before the wait, with
// a shorter bound, would give up early with a bare "deadline exceeded".
func TestCloseWaitsForTheLockAsDocumented(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := openTemp(t)
		scope, err := d.ID()
		if err != nil {
			t.Fatal(err)
		}
		eng := newBackEngine(scope, "store.registry")
		w := closingWindow(t, d, eng, scope, "store.registry")
		busy, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Unlock()

		ctx, cancel := context.WithCancel(context.Background())
		cancel() // SIGINT arrived before the close
		start := time.Now()
		_, err = w.close(ctx)
		waited := time.Since(start)
		if waited < closeLockWait {
			t.Errorf("the close gave up after %s, want at least %s", waited, closeLockWait)
		}
		var be *state.BusyError
		if !errors.As(err, &be) || !strings.Contains(err.Error(), "held by pid") {
			t.Errorf("close: %v, want a busy error naming the holder", err)
		}
		if !eng.ctrs["store.registry"].Running {
			t.Error("the held container was not brought back before the wait for the lock")
		}
	})
}

// writeHold records h in the state directory's holds file, as a window's
// open does.
func writeHold(t *testing.T, d *state.Dir, h coord.Hold) {
	t.Helper()
	l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Write(coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{h}}); err != nil {
		t.Fatal(err)
	}
}

// runs reports whether the listing has name running.
func runs(observed []engine.Container, name string) bool {
	for _, c := range observed {
		if c.Name == name {
			return c.Running
		}
	}
	return false
}
