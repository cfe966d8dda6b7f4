package window

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
)

// Inspect answers the close's health wait: a container backEngine started
// runs, without a healthcheck.
func (e *backEngine) Inspect(_ context.Context, id string) (engine.Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.find(id); c != nil {
		return *c, nil
	}
	return engine.Container{}, engine.ErrNotFound
}

// TestCloseWaitsForHealth: a held container started again that then fails
// its probe fails the window (exit 1), naming it and the probe's output;
// it runs, so its hold goes.
func TestCloseWaitsForHealth(t *testing.T) {
	d := openTemp(t)
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	f := enginetest.NewFake("img:1")
	id, err := f.Create(ctx, "store.registry", engine.Spec{Image: "img:1",
		Labels:      map[string]string{lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleService},
		Healthcheck: &engine.Healthcheck{Test: []string{"CMD", "true"}, Interval: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	_ = id // created, never started: held stopped
	f.SetHealth("img:1", "unhealthy", "registry: storage unreadable")
	w := closingWindow(t, d, f, scope, "store.registry")

	entry, err := w.close(ctx)
	var failed *FailedError
	if !errors.As(err, &failed) || failed.Fault() != fault.Failed || !strings.Contains(err.Error(), "store.registry") ||
		!strings.Contains(err.Error(), "unhealthy: registry: storage unreadable") {
		t.Fatalf("close: %v, want exit 1 naming store.registry unhealthy", err)
	}
	if entry == nil || entry.Result != ResultFailed {
		t.Fatalf("entry = %+v, want a failed window", entry)
	}
	if c, _ := f.Get("store.registry"); !c.Running {
		t.Errorf("store.registry does not run")
	}
	var doc coord.HoldsDoc
	if _, err := d.Read(coord.HoldsFile, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Holds) != 0 {
		t.Errorf("holds = %+v, want none: the container runs", doc.Holds)
	}

	// Healthy, the same close succeeds.
	f.SetHealth("img:1", "healthy", "ok")
	f.SetRunning("store.registry", false)
	w = closingWindow(t, d, f, scope, "store.registry")
	if _, err := w.close(ctx); err != nil {
		t.Fatalf("close of a healthy container: %v", err)
	}
}
