package window

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// stuckEngine reports the window's step container as still running, as an
// engine that refused the kill would. Any other call panics (nil embedded
// interface): the close must not start, recreate or touch anything.
type stuckEngine struct {
	engine.Client
	step    engine.Container
	listErr error
}

func (e *stuckEngine) List(context.Context, map[string]string) ([]engine.Container, error) {
	if e.listErr != nil {
		return nil, e.listErr
	}
	return []engine.Container{e.step}, nil
}

// TestCloseKeepsHoldWhileStepRuns: a run: step whose container could not be
// stopped may still be sweeping, so the close brings nothing back and keeps
// the hold (the incident: a registry started mid-sweep takes an upload the
// sweep then deletes). An engine that cannot say whether the step container
// runs keeps the hold too: fail closed.
func TestCloseKeepsHoldWhileStepRuns(t *testing.T) {
	for _, tt := range []struct {
		name    string
		listErr error
		want    string
	}{
		{"step container still runs", nil, "still runs"},
		{"engine cannot say", &engine.UnreachableError{Host: "unix:///x.sock", Err: errors.New("connection refused")}, "cannot tell"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := openTemp(t)
			scope, err := d.ID()
			if err != nil {
				t.Fatal(err)
			}
			now := time.Date(2026, 11, 29, 3, 30, 0, 0, time.UTC)
			h := coord.Hold{ID: "w-1", Module: "store", Step: "gc", PID: 1, Containers: []string{"store.registry"},
				OpenedAt: now, Deadline: now.Add(time.Hour), StepContainer: StepContainerName("store", "gc")}
			writeHold(t, d, h)

			eng := &stuckEngine{listErr: tt.listErr, step: engine.Container{Name: h.StepContainer, Running: true,
				Labels: map[string]string{lifecycle.LabelManaged: scope, lifecycle.LabelWindow: "w-1", lifecycle.LabelRole: lifecycle.RoleStep}}}
			w := &window{d: d, eng: eng, id: "w-1", hold: &h, openedAt: now, result: ResultTimeout, scope: scope,
				opts: Options{Now: func() time.Time { return now }, Progress: func(string, ...any) {}},
				plan: &plan{module: "store", step: "gc", held: h.Containers, def: &mesh.Step{Run: &mesh.RunStep{}}}}

			entry, err := w.close(context.Background())
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "hold stays") {
				t.Fatalf("close: err = %v, want %q and the hold kept", err, tt.want)
			}
			if entry != nil {
				t.Fatalf("close wrote a history entry for a window that is not closed: %+v", entry)
			}
			var doc coord.HoldsDoc
			if _, err := d.Read(coord.HoldsFile, &doc); err != nil {
				t.Fatal(err)
			}
			if _, ok := doc.Find("w-1"); !ok {
				t.Fatal("the hold was dropped")
			}
		})
	}
}
