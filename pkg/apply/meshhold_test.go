package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// gatherStore is a GatherStore of one gathering of module m, run by
// host-b. RecordEnd fails with endErr, else it ends the gathering.
type gatherStore struct {
	g      ledger.Gathering
	endErr error
	ends   []ledger.StepEnd
}

func (s *gatherStore) JoinGathering(context.Context, ledger.Join) (coord.Gathered, error) {
	return nil, errors.New("an apply joins nothing")
}

func (s *gatherStore) PreviewJoin(context.Context, ledger.Join) (ledger.JoinPreview, error) {
	return ledger.JoinPreview{}, errors.New("an apply joins nothing")
}

func (s *gatherStore) Gathering(context.Context, string) (ledger.Gathering, bool, error) {
	return ledger.Gathering{}, false, errors.New("an apply reads by id")
}

func (s *gatherStore) GatheringByID(_ context.Context, module, id string) (ledger.Gathering, bool, error) {
	return s.g, module == s.g.Module && id == s.g.ID, nil
}

func (s *gatherStore) RecordEnd(_ context.Context, _, _ string, end ledger.StepEnd) error {
	s.ends = append(s.ends, end)
	if s.endErr != nil {
		return s.endErr
	}
	s.g.State, s.g.End = ledger.GatherEnded, &end
	return nil
}

func (s *gatherStore) Gatherings(context.Context) ([]ledger.Gathering, error) {
	return nil, errors.New("an apply lists no gathering")
}

// deadMeshWindow applies m.c, then leaves what a dead mesh window's hold
// of it leaves: m.c stopped, the hold recorded. runner says this host ran
// the step, whose container then exited 0.
func deadMeshWindow(t *testing.T, runner bool) (*state.Dir, *enginetest.Fake) {
	t.Helper()
	ctx := context.Background()
	d, f := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, f, meshOf(t, "c: {image: "+busybox+"}"), nil); err != nil {
		t.Fatal(err)
	}
	c, _ := f.Get("m.c")
	if err := f.Stop(ctx, c.ID, 0); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	h := coord.Hold{ID: "w-1", Module: "m", Step: "s", PID: 1, Containers: []string{"m.c"}, Restart: map[string]string{"m.c": "unless-stopped"},
		OpenedAt: now, Deadline: now.Add(time.Hour), Gathering: "g-1", Runner: "host-b"}
	if runner {
		scope, err := d.ID()
		if err != nil {
			t.Fatal(err)
		}
		h.StepContainer = "meshctl-window.m.s"
		id, err := f.Create(ctx, h.StepContainer, engine.Spec{Image: busybox, Labels: map[string]string{
			lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleStep, lifecycle.LabelModule: "m"}})
		if err == nil {
			err = f.Start(ctx, id)
		}
		if err != nil {
			t.Fatal(err)
		}
		f.SetRunning(h.StepContainer, false)
	}
	l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Write(coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{h}}); err != nil {
		t.Fatal(err)
	}
	return d, f
}

// TestApplyKeepsAMeshHoldWhileItsStepRuns: an apply on a member leaves a
// dead mesh window's container stopped while the runner's step runs. Once
// etcd says the step ended, the next apply brings it back.
func TestApplyKeepsAMeshHoldWhileItsStepRuns(t *testing.T) {
	d, f := deadMeshWindow(t, false)
	s := &gatherStore{g: ledger.Gathering{Module: "m", Step: "s", ID: "g-1", Runner: "host-b", State: ledger.GatherStarted}}
	mesh := func(o *Options) { o.Mesh = coord.Mesh{Gather: s, Host: "host-a"} }
	file := meshOf(t, "c: {image: "+busybox+"}")
	rep, err := run(t, d, f, file, mesh)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := f.Get("m.c"); c.Running || len(rep.Windows) != 1 || rep.Windows[0].State != coord.Orphaned {
		t.Fatalf("m.c running %v, windows %+v; want m.c held by the orphaned hold", c.Running, rep.Windows)
	}
	code := 0
	s.g.State, s.g.End = ledger.GatherEnded, &ledger.StepEnd{Result: "ok", Code: &code, By: "host-b"}
	if rep, err = run(t, d, f, file, mesh); err != nil {
		t.Fatal(err)
	}
	if c, _ := f.Get("m.c"); !c.Running || len(rep.Released) != 1 {
		t.Errorf("m.c running %v, released %+v; want the hold released, m.c back", c.Running, rep.Released)
	}
	if len(s.ends) != 0 {
		t.Errorf("a member recorded an end: %+v", s.ends)
	}
}

// TestApplyRecordsTheRunnersEnd: an apply on the runner's host finds its
// dead window's step container exited. It records the end in etcd, then
// brings the held container back. While etcd refuses the record, the
// hold stays.
func TestApplyRecordsTheRunnersEnd(t *testing.T) {
	d, f := deadMeshWindow(t, true)
	s := &gatherStore{g: ledger.Gathering{Module: "m", Step: "s", ID: "g-1", Runner: "host-b", State: ledger.GatherStarted},
		endErr: errors.New("etcd unreachable")}
	mesh := func(o *Options) { o.Mesh = coord.Mesh{Gather: s, Host: "host-b"} }
	file := meshOf(t, "c: {image: "+busybox+"}")
	rep, err := run(t, d, f, file, mesh)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := f.Get("m.c"); c.Running || len(rep.Windows) != 1 || rep.Windows[0].State != coord.Unknown {
		t.Fatalf("m.c running %v, windows %+v; want m.c held, the hold unknown", c.Running, rep.Windows)
	}
	s.endErr = nil
	if rep, err = run(t, d, f, file, mesh); err != nil {
		t.Fatal(err)
	}
	if c, _ := f.Get("m.c"); !c.Running || len(rep.Released) != 1 {
		t.Errorf("m.c running %v, released %+v; want the hold released, m.c back", c.Running, rep.Released)
	}
	if len(s.ends) != 2 || s.ends[1].Result != "ok" || s.ends[1].By != "host-b" {
		t.Errorf("ends %+v; want two tries, the last ok by host-b", s.ends)
	}
}
