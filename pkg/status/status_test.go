package status

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// fakeEngine answers List from a fixed set of containers; status needs no
// other call (any other panics through the nil embedded interface).
type fakeEngine struct {
	engine.Client
	containers []engine.Container
	lists      int
}

func (f *fakeEngine) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	f.lists++
	var out []engine.Container
	for _, c := range f.containers {
		ok := true
		for k, v := range labels {
			if c.Labels[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

const meshYAML = `
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1
      web:
        image: meshtest/busybox:1
    steps:
      gc:
        while-stopped: [registry]
        run:
          command: [garbage-collect]
`

var t0 = time.Date(2026, 3, 1, 3, 30, 2, 0, time.UTC)

type fixture struct {
	d       *state.Dir
	scope   string
	desired map[string]lifecycle.Desired
}

func newFixture(t *testing.T, src string) *fixture {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{d: d, scope: scope, desired: map[string]lifecycle.Desired{}}
	if src == "" {
		return fx
	}
	f, err := mesh.Decode("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	desired, err := record.Desire(f, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]record.Resolved{}
	for _, x := range desired {
		images[x.Name] = record.Resolved{Image: x.Image}
		fx.desired[x.Name] = x
	}
	fx.write(t, record.AppliedFile, &record.Applied{AppliedAt: t0, Source: "mesh.yaml", File: f, Images: images})
	fx.write(t, record.ReportFile, &record.LastReport{FinishedAt: t0, Source: "mesh.yaml", Result: "ok"})
	return fx
}

func (fx *fixture) write(t *testing.T, name string, doc state.Document) {
	t.Helper()
	l, err := fx.d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Write(name, doc); err != nil {
		t.Fatal(err)
	}
}

// service is the container apply would have made for name, running or not.
func (fx *fixture) service(name string, running bool) engine.Container {
	spec := fx.desired[name].EngineSpec(fx.scope)
	st := "exited"
	if running {
		st = "running"
	}
	return engine.Container{ID: "id-" + name, Name: name, Image: spec.Image, State: st, Running: running, Labels: spec.Labels}
}

// drifted is store.web running as an apply of another image made it: its
// recorded spec differs from the applied one.
func (fx *fixture) drifted(t *testing.T) engine.Container {
	t.Helper()
	c := fx.service("store.web", true)
	other, err := mesh.Decode("x.yaml", []byte(strings.Replace(meshYAML, "image: meshtest/busybox:1", "image: meshtest/busybox:2", 1)))
	if err != nil {
		t.Fatal(err)
	}
	od, err := record.Desire(other, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range od {
		if x.Name == "store.web" {
			c.Labels = x.EngineSpec(fx.scope).Labels
		}
	}
	return c
}

// step is a window's one-off container.
func (fx *fixture) step(name string, running bool) engine.Container {
	return engine.Container{ID: "id-" + name, Name: name, Running: running, Labels: map[string]string{
		lifecycle.LabelManaged: fx.scope, lifecycle.LabelRole: lifecycle.RoleStep, lifecycle.LabelModule: "store"}}
}

func (fx *fixture) hold(t *testing.T, live bool, stepContainer string) coord.Hold {
	t.Helper()
	h := coord.Hold{ID: "w-20260301T033002-abcdef", Module: "store", Step: "gc", PID: 4242,
		Containers: []string{"store.registry"}, OpenedAt: t0, Deadline: t0.Add(time.Hour), StepContainer: stepContainer}
	fx.write(t, coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{h}})
	if live {
		l, err := fx.d.Lock(context.Background(), coord.WindowLock(h.ID), state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Unlock() })
	}
	return h
}

func states(rep *Report) map[string]string {
	m := map[string]string{}
	for _, c := range rep.Containers {
		m[c.Name] = c.State
	}
	return m
}

func get(t *testing.T, fx *fixture, eng *fakeEngine, now time.Time) *Report {
	t.Helper()
	rep, err := Get(context.Background(), fx.d, eng, now, fileLedger(fx.d), coord.Mesh{})
	if err != nil {
		t.Fatal(err)
	}
	if eng.lists != 1 {
		t.Errorf("%d list calls, want 1", eng.lists)
	}
	return rep
}

// TestWindowOpenReadsWorking: the host of 03:31, half stopped by a window,
// reads as working with the window named, not as broken.
func TestWindowOpenReadsWorking(t *testing.T) {
	fx := newFixture(t, meshYAML)
	h := fx.hold(t, true, "")
	eng := &fakeEngine{containers: []engine.Container{fx.service("store.registry", false), fx.service("store.web", true)}}
	rep := get(t, fx, eng, t0.Add(time.Minute))

	if got := states(rep); got["store.registry"] != Held || got["store.web"] != Running {
		t.Errorf("states %v", got)
	}
	for _, c := range rep.Containers {
		if c.Name == "store.registry" && (c.Window != h.ID || len(c.Reasons) != 1 || c.Reasons[0] != "window "+h.ID+" store/gc open") {
			t.Errorf("held container %+v does not name its window", c)
		}
	}
	if !strings.HasPrefix(rep.Summary, "working: ") || !strings.Contains(rep.Summary, h.ID) || !strings.Contains(rep.Summary, "store/gc open") {
		t.Errorf("summary %q", rep.Summary)
	}
	if len(rep.Windows) != 1 || rep.Windows[0].State != coord.Open || rep.Windows[0].ID != h.ID {
		t.Errorf("windows %+v", rep.Windows)
	}

	// Past its deadline and still alive: honoured, and said to be overdue.
	eng.lists = 0
	rep = get(t, fx, eng, t0.Add(2*time.Hour))
	if states(rep)["store.registry"] != Held || !strings.Contains(rep.Summary, "store/gc overdue") {
		t.Errorf("overdue: %v, %q", states(rep), rep.Summary)
	}
}

// TestOrphanedWindowReadsWorking: the window's process is gone but its step
// container still sweeps: still held, still working.
func TestOrphanedWindowReadsWorking(t *testing.T) {
	fx := newFixture(t, meshYAML)
	fx.hold(t, false, "meshctl-window.store.gc")
	eng := &fakeEngine{containers: []engine.Container{fx.service("store.registry", false), fx.service("store.web", true),
		fx.step("meshctl-window.store.gc", true)}}
	rep := get(t, fx, eng, t0)
	if states(rep)["store.registry"] != Held {
		t.Errorf("states %v", states(rep))
	}
	if _, listed := states(rep)["meshctl-window.store.gc"]; listed {
		t.Error("the step container is listed as a service container")
	}
	if !strings.Contains(rep.Summary, "store/gc orphaned") || !strings.HasPrefix(rep.Summary, "working: ") {
		t.Errorf("summary %q", rep.Summary)
	}
}

// TestStaleWindowReadsBroken: a dead window holds nothing: its stopped
// container is stopped, and the host needs attention (an apply heals it).
func TestStaleWindowReadsBroken(t *testing.T) {
	for _, stepName := range []string{"", "meshctl-window.store.gc"} {
		t.Run("step container "+stepName, func(t *testing.T) {
			fx := newFixture(t, meshYAML)
			var extra []engine.Container
			if stepName != "" {
				extra = []engine.Container{fx.step(stepName, false)} // exited
			}
			fx.hold(t, false, stepName)
			eng := &fakeEngine{containers: append([]engine.Container{fx.service("store.registry", false), fx.service("store.web", true)}, extra...)}
			rep := get(t, fx, eng, t0)
			if states(rep)["store.registry"] != Stopped {
				t.Errorf("states %v", states(rep))
			}
			if !strings.HasPrefix(rep.Summary, "attention: ") {
				t.Errorf("summary %q", rep.Summary)
			}
			if len(rep.Windows) != 1 || rep.Windows[0].State != coord.Stale {
				t.Errorf("windows %+v", rep.Windows)
			}
		})
	}
}

// TestContainerStates covers the states without a window.
func TestContainerStates(t *testing.T) {
	fx := newFixture(t, meshYAML)
	drifted := fx.drifted(t)
	leftover := fx.service("store.registry", true)
	leftover.Name, leftover.ID = "store.old", "id-old"
	eng := &fakeEngine{containers: []engine.Container{drifted, leftover,
		// Another state directory's container is not this host's business.
		{ID: "x", Name: "store.registry", Running: true, Labels: map[string]string{lifecycle.LabelManaged: "another"}}}}
	rep := get(t, fx, eng, t0)
	got := states(rep)
	if got["store.registry"] != Missing || got["store.web"] != Drifted || got["store.old"] != Running {
		t.Errorf("states %v", got)
	}
	for _, c := range rep.Containers {
		if c.Name == "store.web" && (len(c.Reasons) == 0 || !strings.Contains(strings.Join(c.Reasons, ","), "image")) {
			t.Errorf("drifted reasons %v", c.Reasons)
		}
		if c.Name == "store.old" && !strings.Contains(strings.Join(c.Reasons, ","), "not in the applied mesh file") {
			t.Errorf("leftover reasons %v", c.Reasons)
		}
	}
	if !strings.HasPrefix(rep.Summary, "attention: ") {
		t.Errorf("summary %q", rep.Summary)
	}

	// All running, nothing open: ok; a failed last apply says so.
	fx2 := newFixture(t, meshYAML)
	eng2 := &fakeEngine{containers: []engine.Container{fx2.service("store.registry", true), fx2.service("store.web", true)}}
	if rep := get(t, fx2, eng2, t0); rep.Summary != "ok" || rep.LastApply == nil || rep.LastApply.Result != "ok" {
		t.Errorf("healthy host: %q, %+v", rep.Summary, rep.LastApply)
	}
	fx2.write(t, record.ReportFile, &record.LastReport{FinishedAt: t0, Source: "mesh.yaml", Result: "failed", Error: "boom"})
	eng2.lists = 0
	if rep := get(t, fx2, eng2, t0); !strings.Contains(rep.Summary, "last apply failed") {
		t.Errorf("failed apply: %q", rep.Summary)
	}
}

// TestNothingApplied: a fresh host has an empty, not a null, report.
func TestNothingApplied(t *testing.T) {
	fx := newFixture(t, "")
	rep := get(t, fx, &fakeEngine{}, t0)
	if !strings.HasSuffix(rep.Summary, " is empty: nothing applied yet") || rep.Containers == nil || rep.Windows == nil || rep.Builds == nil || rep.LastApply != nil || len(rep.Problems) != 0 {
		t.Errorf("report %+v", rep)
	}
}

// fileLedger reads a module's current build from d's file ledger.
func fileLedger(d *state.Dir) func(module string) (ledger.Build, bool, error) {
	return func(m string) (ledger.Build, bool, error) { return ledger.New(d).CurrentBuild(context.Background(), m) }
}

// TestLeftoverIsAProblem: a container a recreate left under a temporary
// name, running or stopped, with no live apply changing it, is a problem.
// One running aside answers beside the service. Each says what the next
// apply does with it, which the heal does (coord.healDead).
func TestLeftoverIsAProblem(t *testing.T) {
	for _, tc := range []struct {
		name    string
		running bool
		base    bool // the service runs under its name
		says    string
	}{
		{lifecycle.RetiringName("store.web"), true, true, "is running, left by a recreate of store.web; meshctl apply --last removes it"},
		{lifecycle.RetiringName("store.web"), false, true, "is stopped, left by a recreate of store.web; meshctl apply --last removes it"},
		{lifecycle.OldName("store.web"), true, false, "is running, left by a recreate of store.web; meshctl apply --last puts it back as store.web"},
		{lifecycle.NewName("store.web"), true, false, "meshctl apply --last removes it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, meshYAML)
			left := fx.service("store.web", tc.running)
			left.Name, left.ID = tc.name, "id-left"
			cs := []engine.Container{fx.service("store.registry", true), left}
			if tc.base {
				cs = append(cs, fx.service("store.web", true))
			}
			rep := get(t, fx, &fakeEngine{containers: cs}, t0)
			if !slices.ContainsFunc(rep.Problems, func(p string) bool {
				return strings.HasPrefix(p, "container "+tc.name+" ") && strings.HasSuffix(p, tc.says)
			}) {
				t.Errorf("problems %q: want %s that %s", rep.Problems, tc.name, tc.says)
			}
			if !strings.HasPrefix(rep.Summary, "attention: ") {
				t.Errorf("summary %q", rep.Summary)
			}
		})
	}
}
