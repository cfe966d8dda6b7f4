package coord

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/pkg/state"
)

type fuzzExitCoder interface{ Fault() fault.Kind }

// FuzzHolds feeds any bytes to the holds file and the history, as apply,
// window and status read them: reading, classifying (window locks, then
// the step listing) and reporting never panic, a file that cannot be used
// is refused with an error that maps to exit 2, and a hold id is never a
// way out of the state directory.
func FuzzHolds(f *testing.F) {
	hold := `{"id":"w-20250301T033000-abcdef","module":"store","step":"gc","pid":4242,"containers":["store.registry"],` +
		`"restart":{"store.registry":"unless-stopped"},"opened_at":"2025-03-01T03:30:00Z","deadline":"2025-03-01T04:30:00Z","step_container":"meshctl-window.store.gc"}`
	entry := `{"id":"w-1","module":"store","step":"gc","opened_at":"2025-03-01T03:30:00Z","closed_at":"2025-03-01T03:31:00Z","result":"ok","step_exit_code":0}`
	f.Add([]byte(`{"version":1,"holds":[`+hold+`]}`), []byte(`{"version":1,"windows":[`+entry+`]}`))
	f.Add([]byte(`{"version":1,"holds":[{"id":"../../etc/passwd"}]}`), []byte(`{"version":1}`))
	f.Add([]byte(`{"version":1,"holds":[{"id":"a/b","step_container":"x"},{"id":""}]}`), []byte(`{"version":1,"windows":null}`))
	f.Add([]byte(`{"version":1,"holds":null}`), []byte(`{"version":9}`))
	f.Add([]byte(`{"holds":[]}`), []byte(`[]`))
	f.Add([]byte(`{"version":2,"holds":[{"id":"w-2","deferred":["store.registry","web.app"]}]}`), []byte(`{"version":1}`))
	f.Add([]byte(`{"version":3,"holds":[]}`), []byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, holdsFile, historyFile []byte) {
		dir := filepath.Join(t.TempDir(), "state")
		d, err := state.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{HoldsFile: holdsFile, HistoryFile: historyFile} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		hd, hist, err := ReadHolds(d.Read)
		if err != nil {
			fuzzWantExit2(t, err)
			return
		}
		now := time.Date(2025, 3, 1, 4, 0, 0, 0, time.UTC)
		steps := func() (func(string) bool, error) {
			return func(name string) bool { return len(name)%2 == 0 }, nil
		}
		classified, _, err := Liveness{Dir: d}.Classify(&hd, now, steps)
		if err != nil {
			fuzzWantExit2(t, err)
			return
		}
		if len(classified) != len(hd.Holds) {
			t.Fatalf("%d holds classified, of %d", len(classified), len(hd.Holds))
		}
		for _, c := range classified {
			_ = ViewOf(c.Hold, c.State).Describe()
			if c.StepContainer == "" && c.State != Open && c.State != Overdue && c.State != Stale {
				t.Errorf("hold %q without a step container reads %s", c.ID, c.State)
			}
		}
		n := len(hist.Windows)
		released := dropStale(&hd, &hist, classified, now)
		if len(hist.Windows) < min(n, HistoryLimit) {
			t.Fatalf("history of %d entries became %d", n, len(hist.Windows))
		}
		for _, r := range released {
			if _, ok := hd.Find(r.ID); ok && r.ID != "" {
				t.Errorf("released hold %q is still in the holds file", r.ID)
			}
		}
		// Whatever was read is written back whole.
		lock, err := d.Lock(t.Context(), StateLock, state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Unlock()
		if err := errors.Join(lock.Write(HoldsFile, &hd), lock.Write(HistoryFile, &hist)); err != nil {
			t.Fatalf("write back: %v", err)
		}
		if _, _, err := ReadHolds(d.Read); err != nil {
			t.Fatalf("read back: %v", err)
		}
	})
}

// fuzzWantExit2 fails unless err maps to exit status 2 (bad input).
func fuzzWantExit2(t *testing.T, err error) {
	t.Helper()
	var c fuzzExitCoder
	if !errors.As(err, &c) || c.Fault() != fault.BadInput {
		t.Fatalf("error %T does not map to exit 2: %v", err, err)
	}
	if err.Error() == "" {
		t.Fatal("empty error message")
	}
}
