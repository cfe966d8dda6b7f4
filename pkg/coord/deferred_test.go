package coord

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/state"
)

// TestRecordDeferred: an apply records the changes it deferred in the hold
// of the window whose close carries them out. Each name once, sorted. A
// hold that is gone is skipped, and another window's hold is untouched.
// CloseHold keeps only the deferrals of what stays held.
func TestRecordDeferred(t *testing.T) {
	d := openTemp(t)
	lock := lockState(t, d)
	other := hold("w-2")
	other.Module, other.Containers = "web", []string{"web.app"}
	w := &Windows{}
	if err := AddHold(lock, w, hold("w-1")); err != nil {
		t.Fatal(err)
	}
	if err := AddHold(lock, w, other); err != nil {
		t.Fatal(err)
	}
	for _, deferred := range []map[string][]string{
		{"w-1": {"store.registry"}, "w-gone": {"x.y"}},
		{"w-1": {"store.web", "store.registry"}},
	} {
		if err := RecordDeferred(lock, deferred); err != nil {
			t.Fatal(err)
		}
	}
	got, err := DeferredIn(lock.Read, "w-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"store.registry", "store.web"}; !slices.Equal(got, want) {
		t.Errorf("w-1 deferred %q, want %q", got, want)
	}
	if got, _ := DeferredIn(lock.Read, "w-2"); len(got) != 0 {
		t.Errorf("w-2 deferred %q, want nothing: no apply deferred a change to what it holds", got)
	}
	if got, _ := DeferredIn(lock.Read, "w-gone"); len(got) != 0 {
		t.Errorf("a hold that is gone has deferred %q", got)
	}

	// The close keeps the hold on store.registry only: so its deferrals.
	if _, err := CloseHold(lock, Entry{ID: "w-1", Result: "failed"}, []string{"store.registry"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := DeferredIn(lock.Read, "w-1"); !slices.Equal(got, []string{"store.registry"}) {
		t.Errorf("kept hold deferred %q, want [store.registry]", got)
	}
}

// oldHoldsDoc is holds.json as a meshctl before version 2 decodes it.
// That meshctl knew no deferred containers, and read version 1 only.
type oldHoldsDoc struct {
	state.Header
	Holds []struct {
		ID            string            `json:"id"`
		Module        string            `json:"module"`
		Step          string            `json:"step"`
		PID           int               `json:"pid"`
		Containers    []string          `json:"containers"`
		Restart       map[string]string `json:"restart,omitempty"`
		OpenedAt      string            `json:"opened_at"`
		Deadline      string            `json:"deadline"`
		StepContainer string            `json:"step_container,omitempty"`
		StepGroup     int               `json:"step_group,omitempty"`
	} `json:"holds"`
}

// TestHoldsVersion: holds.json is written as version 2, which a meshctl
// before it refuses, saying to upgrade, not that "deferred" is an unknown
// field. A version 1 file, without deferred containers, is read as it is.
// A version newer than 2 is refused the same way.
func TestHoldsVersion(t *testing.T) {
	d := openTemp(t)
	lock := lockState(t, d)
	h := hold("w-1")
	h.Deferred = []string{"store.registry"}
	if err := AddHold(lock, &Windows{}, h); err != nil {
		t.Fatal(err)
	}
	_, err := d.Read(HoldsFile, &oldHoldsDoc{})
	if err == nil || !strings.Contains(err.Error(), "has version 2, newer than this meshctl reads (1): upgrade meshctl") {
		t.Errorf("an older meshctl reads holds.json: %v, want a refusal saying to upgrade", err)
	}

	p := filepath.Join(d.Path(), HoldsFile)
	old := `{"version": 1, "holds": [{"id": "w-old", "module": "store", "step": "gc", "pid": 1,
	  "containers": ["store.registry"], "opened_at": "2026-03-01T03:30:02Z", "deadline": "2026-03-01T04:30:02Z"}]}`
	if err := os.WriteFile(p, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	hd, _, err := ReadHolds(d.Read)
	if err != nil {
		t.Fatalf("a version 1 holds.json: %v, want it read", err)
	}
	if got, ok := hd.Find("w-old"); !ok || len(got.Deferred) != 0 {
		t.Errorf("version 1 hold %+v, want w-old with nothing deferred", got)
	}

	if err := os.WriteFile(p, []byte(`{"version": 3, "holds": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadHolds(d.Read); err == nil || !strings.Contains(err.Error(), "has version 3, newer than this meshctl reads (2): upgrade meshctl") {
		t.Errorf("a version 3 holds.json: %v, want a refusal saying to upgrade", err)
	}
}
