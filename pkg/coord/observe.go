package coord

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// Windows is the holds and the window history as one listing classifies
// them. ObserveMesh makes it; HealClaims and ReleaseStale work from it.
type Windows struct {
	Holds      HoldsDoc
	History    History
	Classified []Classified
	// Observed is the listing of the state directory's containers. It is
	// made after every window's lock was checked. ReleaseStale and
	// HealClaims keep it up to date.
	Observed []engine.Container
	// mesh is what ReleaseStale records a dead runner's end with.
	mesh Mesh
}

// Mesh is what a dead mesh window's hold (mesh: all) is classified and
// released with. Its zero value is a host without an etcd ledger. A dead
// window's mesh hold then reads unknown and stays.
type Mesh struct {
	// Gather is the etcd side of mesh windows, nil with a file ledger. It
	// is asked only for a dead window's mesh hold whose step does not run
	// here. So a host without one never contacts etcd.
	Gather GatherStore
	// Host is this host's name in the mesh (--host-name). It records the
	// end of its own dead window's step.
	Host string
}

// liveness is the Liveness of d for m. It reads each gathering once.
func (m Mesh) liveness(ctx context.Context, d *state.Dir) Liveness {
	l := Liveness{Dir: d, Host: m.Host}
	if m.Gather == nil {
		return l
	}
	type read struct {
		g   ledger.Gathering
		ok  bool
		err error
	}
	seen := map[string]read{}
	l.Gathering = func(module, id string) (ledger.Gathering, bool, error) {
		k := module + "/" + id
		r, ok := seen[k]
		if !ok {
			// Under the state lock, an etcd gone costs one attempt, not the
			// ledger's timeout. The hold then stays for the next run.
			rctx, cancel := context.WithTimeout(ctx, ledger.RecheckTimeout)
			r.g, r.ok, r.err = m.Gather.GatheringByID(rctx, module, id)
			cancel()
			seen[k] = r
		}
		return r.g, r.ok, r.err
	}
	return l
}

// ListingError is an engine listing that failed where the windows'
// states needed it.
type ListingError struct{ Err error }

func (e *ListingError) Error() string { return "list containers: " + e.Err.Error() }
func (e *ListingError) Unwrap() error { return e.Err }

// ObserveMesh reads the holds and the history and classifies each hold.
// It checks every window's lock first, then lists the containers once.
// Last, it asks m.Gather about each dead window's mesh hold whose step
// does not run here. It changes nothing. read is a snapshot's Dir.Read or
// lock.Read under the state lock. A listing that fails is a
// *ListingError. ReleaseStale records ends with m.
func ObserveMesh(ctx context.Context, d *state.Dir, read func(string, state.Document) (bool, error),
	eng engine.Client, scope string, now time.Time, m Mesh) (*Windows, error) {
	hd, hist, err := ReadHolds(read)
	if err != nil {
		return nil, err
	}
	w := &Windows{Holds: hd, History: hist, mesh: m}
	classified, listErr, err := m.liveness(ctx, d).Classify(&w.Holds, now, listSteps(ctx, eng, scope, &w.Observed))
	if err != nil {
		return nil, err
	}
	if listErr != nil {
		return nil, &ListingError{Err: listErr}
	}
	w.Classified = classified
	return w, nil
}

// Held returns the containers that the classified holds hold, in any
// state.
func (w *Windows) Held() map[string]bool {
	held := map[string]bool{}
	for _, c := range w.Classified {
		for _, n := range c.Containers {
			held[n] = true
		}
	}
	return held
}

// StaleCount returns how many holds read stale: what ReleaseStale will
// release.
func (w *Windows) StaleCount() int {
	n := 0
	for _, c := range w.Classified {
		if c.State == Stale {
			n++
		}
	}
	return n
}

// stepRunning answers whether a window's step container still runs. It
// reads a listing for a container of this state directory in the step
// role, running. Apply, window and status all ask it this way.
func stepRunning(observed []engine.Container, scope string) func(name string) bool {
	running := map[string]bool{}
	for _, c := range observed {
		if lifecycle.IsStep(c, scope) && engine.StateOf(c, time.Time{}) != engine.Stopped {
			running[c.Name] = true
		}
	}
	return func(name string) bool { return running[name] }
}

// StepsRunning lists the state directory's containers once. It returns
// whether a named step container runs, by that listing. A window's close
// asks it before it brings anything back.
func StepsRunning(ctx context.Context, eng engine.Client, scope string) (func(name string) bool, error) {
	var observed []engine.Container
	return listSteps(ctx, eng, scope, &observed)()
}

// listSteps is the StepsFunc that Classify calls after checking every
// window's lock. It lists the containers in one engine call, and
// *observed receives the listing for the caller's plan.
func listSteps(ctx context.Context, eng engine.Client, scope string, observed *[]engine.Container) StepsFunc {
	return func() (func(string) bool, error) {
		list, err := eng.List(ctx, lifecycle.Managed(scope))
		if err != nil {
			return nil, err
		}
		*observed = list
		return stepRunning(list, scope), nil
	}
}

// ClassifySnapshot reads the holds and the history as snapshots, taking
// no lock, and classifies each hold. Window list and the metrics file
// read holds this way. It connects to the
// engine only when a dead window's step container might still run. When
// the engine cannot say, such a hold reads unknown and stepsErr says why.
func ClassifySnapshot(ctx context.Context, d *state.Dir, connect func() (engine.Client, error), now time.Time) (
	classified []Classified, hist History, stepsErr, err error) {
	return ClassifySnapshotMesh(ctx, d, connect, now, Mesh{})
}

// ClassifySnapshotMesh is ClassifySnapshot, with m.Gather asked about each
// dead window's mesh hold as ObserveMesh asks it.
func ClassifySnapshotMesh(ctx context.Context, d *state.Dir, connect func() (engine.Client, error), now time.Time, m Mesh) (
	classified []Classified, hist History, stepsErr, err error) {
	hd, hist, err := ReadHolds(d.Read)
	if err != nil {
		return nil, hist, nil, err
	}
	steps := func() (func(string) bool, error) {
		if !needsEngine(d, &hd) {
			return func(string) bool { return false }, nil
		}
		scope, ok, err := d.PeekID()
		if err != nil {
			return nil, err
		}
		if !ok {
			// No identity yet: this state directory made no container.
			return func(string) bool { return false }, nil
		}
		eng, err := connect()
		if err != nil {
			return nil, err
		}
		defer eng.Close()
		return StepsRunning(ctx, eng, scope)
	}
	classified, stepsErr, err = m.liveness(ctx, d).Classify(&hd, now, steps)
	return classified, hist, stepsErr, err
}

// needsEngine reports whether a hold of doc belongs to a dead window with
// a step container. Only then does a snapshot need the engine.
func needsEngine(d *state.Dir, doc *HoldsDoc) bool {
	for _, h := range doc.Holds {
		if h.StepContainer == "" {
			continue
		}
		if alive, err := d.Held(WindowLock(h.ID)); err != nil || !alive {
			return true
		}
	}
	return false
}
