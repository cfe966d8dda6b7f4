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

// v2HoldsDoc is holds.json as a meshctl of version 2 decodes it. That
// meshctl knew deferred containers, but no changed ones.
type v2HoldsDoc struct {
	oldHoldsDoc
}

func (*v2HoldsDoc) FormatVersion() int { return 2 }

// TestHoldsVersion: holds.json is written as version 3, which a meshctl
// before it refuses, saying to upgrade, not that "changed" is an unknown
// field. Versions 1 and 2 are read as they are. A version newer than 3 is
// refused the same way.
func TestHoldsVersion(t *testing.T) {
	d := openTemp(t)
	lock := lockState(t, d)
	h := hold("w-1")
	h.Deferred = []string{"store.registry"}
	h.Changed = map[string]Changed{"store.registry": {Aside: "abc", Spec: "sha256:00"}}
	if err := AddHold(lock, &Windows{}, h); err != nil {
		t.Fatal(err)
	}
	for _, older := range []state.Document{&oldHoldsDoc{}, &v2HoldsDoc{}} {
		_, err := d.Read(HoldsFile, older)
		if err == nil || !strings.Contains(err.Error(), "has version 3, newer than this meshctl reads") || !strings.Contains(err.Error(), "upgrade meshctl") {
			t.Errorf("an older meshctl reads holds.json: %v, want a refusal saying to upgrade", err)
		}
	}
	hd, _, err := ReadHolds(d.Read)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := hd.Find("w-1"); !ok || got.Changed["store.registry"].Aside != "abc" {
		t.Errorf("hold %+v, want its changed container read back", got)
	}

	p := filepath.Join(d.Path(), HoldsFile)
	for _, v := range []string{"1", "2"} {
		old := `{"version": ` + v + `, "holds": [{"id": "w-old", "module": "store", "step": "gc", "pid": 1,
	  "containers": ["store.registry"], "opened_at": "2026-03-01T03:30:02Z", "deadline": "2026-03-01T04:30:02Z"}]}`
		if err := os.WriteFile(p, []byte(old), 0o600); err != nil {
			t.Fatal(err)
		}
		hd, _, err := ReadHolds(d.Read)
		if err != nil {
			t.Fatalf("a version %s holds.json: %v, want it read", v, err)
		}
		if got, ok := hd.Find("w-old"); !ok || len(got.Deferred) != 0 || len(got.Changed) != 0 {
			t.Errorf("version %s hold %+v, want w-old with nothing deferred or changed", v, got)
		}
	}

	if err := os.WriteFile(p, []byte(`{"version": 4, "holds": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadHolds(d.Read); err == nil || !strings.Contains(err.Error(), "has version 4, newer than this meshctl reads (3): upgrade meshctl") {
		t.Errorf("a version 4 holds.json: %v, want a refusal saying to upgrade", err)
	}
}
