package record

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/pkg/state"
)

type fuzzExitCoder interface{ Fault() fault.Kind }

// FuzzRecords feeds any bytes to applied.json and last-apply.json, as
// window (the step and the held containers' desired state), status and the
// next apply read them: nothing panics, and a file that cannot be used is
// refused with an error that maps to exit 2 (and is never overwritten).
func FuzzRecords(f *testing.F) {
	applied := `{"version":1,"applied_at":"2025-03-01T03:30:00Z","source":"mesh.yaml",` +
		`"file":{"modules":{"store":{"containers":{"registry":{"image":"meshtest/busybox:1","command":["sleep","inf"]}},` +
		`"steps":{"gc":{"while-stopped":["registry"],"run":{"command":["true"]}}}}}},` +
		`"images":{"store.registry":{"image":"meshtest/busybox:1"}}}`
	report := `{"version":1,"finished_at":"2025-03-01T03:30:00Z","source":"mesh.yaml","result":"ok",` +
		`"report":{"changed":true,"dry_run":false,"engine_calls":2,"containers":[{"name":"store.registry","module":"store",` +
		`"container":"registry","action":"create","reasons":[]}],"windows":[]}}`
	f.Add([]byte(applied), []byte(report))
	f.Add([]byte(`{"version":1,"file":{"modules":{"BAD":{"containers":{"x":{"image":"a"}}}}}}`), []byte(`{"version":1,"report":null}`))
	f.Add([]byte(`{"version":1,"file":{"modules":{"m":{"containers":{"c":{"artifact":"m"}}}}},"images":{}}`), []byte(`{"version":2}`))
	f.Add([]byte(`{"version":1,"file":{"modules":{"m":{"containers":{"c":{"image":"a"}},"steps":{"s":{"while-stopped":["nope"]}}}}}}`), []byte(`{}`))
	f.Add([]byte(`{"version":1,"file":null}`), []byte(`null`))
	f.Fuzz(func(t *testing.T, appliedFile, reportFile []byte) {
		dir := filepath.Join(t.TempDir(), "state")
		d, err := state.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		for name, data := range map[string][]byte{AppliedFile: appliedFile, ReportFile: reportFile} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		lock, err := d.Lock(t.Context(), "state", state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Unlock()
		checkErr := checkRecords(lock)
		if checkErr != nil {
			fuzzWantExit2(t, checkErr)
		}
		a, ok, err := LoadApplied(d)
		if err != nil {
			fuzzWantExit2(t, err)
			if checkErr == nil {
				t.Fatalf("CheckRecords passed a file LoadApplied refuses: %v", err)
			}
			return
		}
		if !ok {
			t.Fatal("applied.json exists, LoadApplied says it does not")
		}
		desired, err := a.Desired(nil)
		if err != nil {
			// What the window and the next apply make of a recorded file
			// that does not hold together: bad input, never a crash.
			fuzzWantExit2(t, err)
			return
		}
		for _, dc := range desired {
			_ = dc.EngineSpec("scope")
		}
		_ = a.ModuleNames()
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
