package status

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestSlotPastBoundIsAProblem: a slot this host recorded is a problem for
// status --check once its deadline passed, never before. It is read from
// mesh.json, without etcd.
func TestSlotPastBoundIsAProblem(t *testing.T) {
	d, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	lock, err := d.Lock(context.Background(), coord.MeshLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	doc := &coord.MeshDoc{Slots: map[string]ledger.Slot{
		"web": {Host: "h1", Module: "web", PID: 42, TakenAt: now.Add(-time.Hour), Deadline: now.Add(-time.Minute)},
		"api": {Host: "h1", Module: "api", PID: 43, TakenAt: now, Deadline: now.Add(time.Minute)},
	}}
	if err := lock.Write(coord.MeshFile, doc); err != nil {
		t.Fatal(err)
	}
	lock.Unlock()
	got := slotsPastBound(d, now)
	if len(got) != 1 || !strings.Contains(got[0], "module web: host h1 has held its slot") || !strings.Contains(got[0], "meshctl mesh release web h1") {
		t.Errorf("problems %q; want web's slot alone, with what to do", got)
	}
}
