package status

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
)

func (f *fakeEngine) Ping(ctx context.Context) error { return nil }

// TestMissingStateDirReadsNothingApplied: status of a state directory that
// does not exist says so, lists nothing, and creates nothing.
func TestMissingStateDirReadsNothingApplied(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	d, err := state.Peek(p)
	if err != nil {
		t.Fatal(err)
	}
	eng := &fakeEngine{}
	rep, err := Get(context.Background(), d, eng, t0, fileLedger(d), coord.Mesh{})
	if err != nil {
		t.Fatal(err)
	}
	if eng.lists != 0 {
		t.Errorf("status listed containers of a state dir that does not exist")
	}
	if want := "no state directory at " + p + ": nothing applied yet"; rep.Summary != want {
		t.Errorf("summary = %q, want %q", rep.Summary, want)
	}
	if rep.LastApply != nil || len(rep.Containers) != 0 {
		t.Errorf("report of nothing: %+v", rep)
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("status created the state dir: %v", err)
	}
}

// TestStatusCreatesNoIdentity: status of a state directory that never
// applied makes no identity (id.json) nor any other file in it.
func TestStatusCreatesNoIdentity(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	if _, err := state.Open(p); err != nil {
		t.Fatal(err)
	}
	d, err := state.Peek(p)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Get(context.Background(), d, &fakeEngine{}, t0, fileLedger(d), coord.Mesh{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(rep.Summary, " is empty: nothing applied yet") {
		t.Errorf("summary = %q", rep.Summary)
	}
	if entries, _ := os.ReadDir(p); len(entries) != 0 {
		t.Fatalf("status made files in the state dir: %v", entries)
	}
}
