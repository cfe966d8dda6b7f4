package coord

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// fakeGather is a GatherStore that knows one gathering, or fails.
type fakeGather struct {
	g     ledger.Gathering
	found bool
	err   error
	// endErr is what RecordEnd returns. ends are the ends it was asked to
	// record, and reads how many gatherings were read.
	endErr error
	ends   []ledger.StepEnd
	reads  int
	// unbounded counts the calls whose context had no deadline, or one
	// past ledger.RecheckTimeout.
	unbounded int
}

func (f *fakeGather) bound(ctx context.Context) {
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > ledger.RecheckTimeout {
		f.unbounded++
	}
}

func (f *fakeGather) JoinGathering(context.Context, ledger.Join) (Gathered, error) {
	return nil, errors.New("fakeGather: no join")
}

func (f *fakeGather) PreviewJoin(context.Context, ledger.Join) (ledger.JoinPreview, error) {
	return ledger.JoinPreview{}, errors.New("fakeGather: no join")
}

func (f *fakeGather) Gathering(context.Context, string) (ledger.Gathering, bool, error) {
	return ledger.Gathering{}, false, errors.New("fakeGather: read by id")
}

func (f *fakeGather) GatheringByID(ctx context.Context, module, id string) (ledger.Gathering, bool, error) {
	f.bound(ctx)
	f.reads++
	if f.err != nil {
		return ledger.Gathering{}, false, f.err
	}
	if !f.found || f.g.Module != module || f.g.ID != id {
		return ledger.Gathering{}, false, nil
	}
	return f.g, true, nil
}

func (f *fakeGather) RecordEnd(ctx context.Context, module, id string, end ledger.StepEnd) error {
	f.bound(ctx)
	f.ends = append(f.ends, end)
	if f.endErr != nil {
		return f.endErr
	}
	f.g.State, f.g.End = ledger.GatherEnded, &end
	return nil
}

func (f *fakeGather) Gatherings(context.Context) ([]ledger.Gathering, error) {
	return nil, errors.New("fakeGather: no listing")
}

const (
	meshStep = "meshctl-window.m.s"
	gatherID = "g-20260101T033000Z-abcdef"
)

// gathering is module m's mesh window gatherID, run by host-b, in state st.
func gathering(st string) *fakeGather {
	g := ledger.Gathering{Module: "m", Step: "s", ID: gatherID, Runner: "host-b", State: st, Expected: []string{"host-a", "host-b"}}
	if st == ledger.GatherEnded {
		code := 0
		g.End = &ledger.StepEnd{Result: "ok", Code: &code, By: "host-b"}
	}
	return &fakeGather{g: g, found: true}
}

// meshSetup makes the held container m.c, stopped, and a dead window's
// hold of it in the holds file. runner says the hold is the runner's,
// with its step container, which exited with code: 0, or else 137 (killed).
// Else it is a member's, whose step runs on host-b.
func meshSetup(t *testing.T, runner bool, code int) (*state.Dir, *enginetest.Fake, string) {
	t.Helper()
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "no", Labels: map[string]string{
		lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService, lifecycle.LabelModule: "m", lifecycle.LabelContainer: "c"}}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h := Hold{ID: "w-1", Module: "m", Step: "s", PID: 1, Containers: []string{"m.c"}, Restart: map[string]string{"m.c": "always"},
		OpenedAt: now, Deadline: now.Add(time.Hour), Gathering: gatherID, Runner: "host-b"}
	if runner {
		h.StepContainer = meshStep
		id, err := eng.Create(ctx, meshStep, engine.Spec{Image: busybox, Labels: map[string]string{
			lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleStep, lifecycle.LabelModule: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			eng.SetRunning(meshStep, false)
		} else if err := eng.Kill(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := d.Lock(ctx, StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if err := lock.Write(HoldsFile, &HoldsDoc{Holds: []Hold{h}}); err != nil {
		t.Fatal(err)
	}
	return d, eng, scope
}

// applyLike does what an apply does with the holds: observe under the
// state lock, record the ends, then release the stale holds. It returns
// the hold's state before the release, its view, and how many it released.
func applyLike(t *testing.T, d *state.Dir, eng *enginetest.Fake, scope string, m Mesh) (string, View, int) {
	t.Helper()
	ctx := context.Background()
	lock, err := d.Lock(ctx, StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	now := time.Now()
	w, err := ObserveMesh(ctx, d, lock.Read, eng, scope, now, m)
	if err != nil || len(w.Classified) != 1 {
		t.Fatalf("observe: %+v, %v", w, err)
	}
	x := lifecycle.Executor{Engine: eng, Scope: scope}
	RecordEnds(ctx, x, w, now, func(string, ...any) {})
	c := w.Classified[0]
	n, err := ReleaseStale(ctx, lock, x, w, noPolicies(), now, func(string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	return c.State, c.View(), n
}

// held reports whether the holds file still has the hold and m.c is not
// running.
func held(t *testing.T, d *state.Dir, eng *enginetest.Fake) bool {
	t.Helper()
	var hd HoldsDoc
	if _, err := d.Read(HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	c, _ := eng.Get("m.c")
	if len(hd.Holds) == 1 && c.Running {
		t.Fatal("the hold is recorded, but m.c runs")
	}
	return len(hd.Holds) == 1
}

// TestMeshHoldOfAMember: a dead window's hold on a host whose mesh
// window's step runs elsewhere is released only once etcd says the
// gathering is over. Started without an end, it stays orphaned and names
// the runner's host. Etcd that cannot say, no etcd ledger, no record of
// the gathering, a gathering not started nor failed: it stays unknown.
func TestMeshHoldOfAMember(t *testing.T) {
	for _, tc := range []struct {
		name   string
		gather *fakeGather // nil: no etcd ledger
		want   string
		why    string
	}{
		{"started, no end", gathering(ledger.GatherStarted), Orphaned, "step runs on host host-b"},
		{"started, what to do", gathering(ledger.GatherStarted), Orphaned, "or run meshctl apply --last on host host-b"},
		{"ended", gathering(ledger.GatherEnded), Stale, ""},
		{"failed", gathering(ledger.GatherFailed), Stale, ""},
		{"etcd cannot say", &fakeGather{err: errors.New("etcd unreachable")}, Unknown, "etcd cannot say"},
		{"no etcd ledger", nil, Unknown, "without an etcd ledger"},
		{"no record", &fakeGather{}, Unknown, "etcd has no record"},
		{"holding", gathering(ledger.GatherHolding), Unknown, "may still start"},
		{"gathering", gathering(ledger.GatherOpen), Unknown, "may still start"},
		// Named as the runner, but with no step here: a host name shared by
		// mistake. It records no end for a step that may run elsewhere.
		{"runner's name, no step", gathering(ledger.GatherStarted), Unknown, "own --host-name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, eng, scope := meshSetup(t, false, 0)
			m := Mesh{Host: "host-a"}
			if strings.HasPrefix(tc.name, "runner's name") {
				m.Host = "host-b"
			}
			if tc.gather != nil {
				m.Gather = tc.gather
			}
			st, v, n := applyLike(t, d, eng, scope, m)
			if st != tc.want {
				t.Fatalf("state %s, want %s", st, tc.want)
			}
			if said := v.Describe() + "; " + v.ToDo(); !strings.Contains(said, tc.why) {
				t.Errorf("view %q does not say %q", said, tc.why)
			}
			if stays := held(t, d, eng); stays != Honoured(tc.want) || (n == 1) == stays {
				t.Errorf("%d released, hold recorded %v; want it kept: %v", n, stays, Honoured(tc.want))
			}
			if tc.gather != nil && len(tc.gather.ends) > 0 {
				t.Errorf("a member recorded an end: %+v", tc.gather.ends)
			}
		})
	}
}

// TestMeshHoldOfTheRunner: the runner's host finds its dead window's step
// container exited. It records the step's end from the exit code in etcd,
// and only then releases the hold. A record that fails keeps the hold
// (unknown) and the container, so a later run records it. An end that
// another recorded stands, and the hold is released.
func TestMeshHoldOfTheRunner(t *testing.T) {
	conflict := &ledger.GatherError{Kind: fault.Conflict, Module: "m", Step: "s", ID: gatherID, Why: "its end is recorded already, as ok by host-b"}
	for _, tc := range []struct {
		name   string
		code   int
		endErr error
		want   string // the state ReleaseStale saw
		result string
	}{
		{"exit 0", 0, nil, Stale, "ok"},
		{"exit 137", 137, nil, Stale, "failed"},
		{"etcd down", 0, errors.New("etcd unreachable"), Unknown, "ok"},
		{"recorded already", 137, conflict, Stale, "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, eng, scope := meshSetup(t, true, tc.code)
			g := gathering(ledger.GatherStarted)
			g.endErr = tc.endErr
			st, v, n := applyLike(t, d, eng, scope, Mesh{Gather: g, Host: "host-b"})
			if len(g.ends) != 1 {
				t.Fatalf("%d ends recorded, want 1", len(g.ends))
			}
			e := g.ends[0]
			if e.Result != tc.result || e.Code == nil || *e.Code != tc.code || e.By != "host-b" || e.At.IsZero() {
				t.Errorf("end %+v, want %s, code %d, by host-b", e, tc.result, tc.code)
			}
			if st != tc.want {
				t.Fatalf("state %s (%s), want %s", st, v.Describe(), tc.want)
			}
			if g.unbounded > 0 {
				t.Errorf("%d etcd calls under the state lock not bounded to one attempt", g.unbounded)
			}
			stays := held(t, d, eng)
			_, stepThere := eng.Get(meshStep)
			if stays != (tc.want == Unknown) || (n == 1) == stays || stepThere != stays {
				t.Errorf("%d released, hold recorded %v, step container there %v", n, stays, stepThere)
			}
			if stays && !strings.Contains(v.Describe(), "could not be recorded") {
				t.Errorf("view %q does not say the end could not be recorded", v.Describe())
			}
		})
	}
}

// TestMeshHoldEndNotYetRecorded: the runner's step is over here but its
// end is not in etcd. Until RecordEnds records it, the hold stays: status
// and a caller that does not record read it unknown, never stale.
func TestMeshHoldEndNotYetRecorded(t *testing.T) {
	d, eng, scope := meshSetup(t, true, 0)
	g := gathering(ledger.GatherStarted)
	w, err := ObserveMesh(context.Background(), d, d.Read, eng, scope, time.Now(), Mesh{Gather: g, Host: "host-b"})
	if err != nil {
		t.Fatal(err)
	}
	if c := w.Classified[0]; c.State != Unknown || !strings.Contains(c.View().ToDo(), "next apply or window run here records it") {
		t.Errorf("state %s (%s), want unknown until the end is recorded", c.State, c.View().Describe())
	}
	if len(g.ends) != 0 {
		t.Errorf("observe recorded an end: %+v", g.ends)
	}
}

// TestMeshHoldRunnerStepRuns: the runner's step container still runs. The
// hold is orphaned by the engine alone, and etcd is not asked.
func TestMeshHoldRunnerStepRuns(t *testing.T) {
	d, eng, scope := meshSetup(t, true, 0)
	eng.SetRunning(meshStep, true)
	g := gathering(ledger.GatherStarted)
	st, v, n := applyLike(t, d, eng, scope, Mesh{Gather: g, Host: "host-b"})
	if st != Orphaned || n != 0 || !strings.Contains(v.Describe(), "still runs here") {
		t.Errorf("state %s, %d released, view %q; want orphaned, its step running here", st, n, v.Describe())
	}
	if g.reads != 0 || len(g.ends) != 0 {
		t.Errorf("etcd asked: %d reads, ends %+v", g.reads, g.ends)
	}
}

// TestHoldsWithoutMeshNeedNoEtcd: a host whose holds are of this host
// only never contacts etcd, dead or alive, stale or orphaned.
func TestHoldsWithoutMeshNeedNoEtcd(t *testing.T) {
	d, eng, scope := meshSetup(t, true, 0)
	lock, err := d.Lock(context.Background(), StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hd HoldsDoc
	if _, err := lock.Read(HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	hd.Holds[0].Gathering, hd.Holds[0].Runner = "", ""
	if err := lock.Write(HoldsFile, &hd); err != nil {
		t.Fatal(err)
	}
	lock.Unlock()
	g := gathering(ledger.GatherStarted)
	st, _, n := applyLike(t, d, eng, scope, Mesh{Gather: g, Host: "host-b"})
	if st != Stale || n != 1 {
		t.Errorf("state %s, %d released; want the local hold released as today", st, n)
	}
	if g.reads != 0 || len(g.ends) != 0 {
		t.Errorf("etcd asked: %d reads, ends %+v", g.reads, g.ends)
	}
}

// TestMeshViewWithoutWhy: a mesh hold's view made from the hold alone, as
// window list makes it, still says where its step runs, and never blames
// the engine for what etcd could not say.
func TestMeshViewWithoutWhy(t *testing.T) {
	h := Hold{ID: "w-1", Module: "m", Step: "s", Gathering: gatherID, Runner: "host-b"}
	if s := ViewOf(h, Orphaned).Describe(); !strings.Contains(s, "step runs on host host-b") {
		t.Errorf("orphaned: %q", s)
	}
	if s := ViewOf(h, Unknown).Describe(); !strings.Contains(s, "mesh window's step is over") || strings.Contains(s, "engine") {
		t.Errorf("unknown: %q", s)
	}
}
