package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/engine/enginetest"
)

// refusingRemove is an engine whose Remove of one container always fails.
type refusingRemove struct {
	*enginetest.Fake
	id string
}

func (r refusingRemove) Remove(ctx context.Context, id string) error {
	if id == r.id {
		return errors.New("engine says no")
	}
	return r.Fake.Remove(ctx, id)
}

// TestPutBackNeverStartsTheOldBesideTheNew: when the failed new container
// cannot be removed, it still holds the name, and the old one must stay
// aside and stopped: starting it (under its aside name) would run two
// copies of the service on one volume (issue 17 item 1).
func TestPutBackNeverStartsTheOldBesideTheNew(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1", "new:1")
	oldID, err := f.Create(ctx, OldName("m.c"), engine.Spec{Image: "old:1"})
	if err != nil {
		t.Fatal(err)
	}
	newID, err := f.Create(ctx, "m.c", engine.Spec{Image: "new:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, newID); err != nil {
		t.Fatal(err)
	}
	old, err := f.Inspect(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	old.Running = true // it ran before the recreate stopped it
	x := Executor{Engine: refusingRemove{Fake: f, id: newID}}
	err = x.PutBack(ctx, "m.c", newID, old)
	if err == nil || !strings.Contains(err.Error(), "stays aside, stopped") {
		t.Fatalf("PutBack = %v, want a failure saying the old one stays aside", err)
	}
	after, err := f.Inspect(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Running || after.Name != OldName("m.c") {
		t.Errorf("the old container is %q, running %v: want it aside and stopped", after.Name, after.Running)
	}
}
