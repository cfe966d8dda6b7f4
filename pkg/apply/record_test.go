package apply

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/pkg/state"
)

// TestCheckRecordsRefusesUnusableFiles: applied.json and last-apply.json
// that do not parse, or that a newer meshctl wrote, stop an apply (exit 2,
// named by path); a missing or valid one does not.
func TestCheckRecordsRefusesUnusableFiles(t *testing.T) {
	valid := map[string]string{
		AppliedFile: `{"version": 1, "applied_at": "2025-03-01T03:30:00Z", "source": "mesh.yaml", "file": null, "images": {}}`,
		ReportFile:  `{"version": 1, "finished_at": "2025-03-01T03:30:00Z", "source": "mesh.yaml", "result": "ok", "report": null}`,
	}
	tests := []struct {
		name, file, content, want string
	}{
		{"missing", "", "", ""},
		{"valid", AppliedFile, valid[AppliedFile], ""},
		{"applied garbage", AppliedFile, `{"version": 1, "applied_at": `, "cannot be read"},
		{"applied newer", AppliedFile, `{"version": 2, "applied_at": "2025-03-01T03:30:00Z", "new": 1}`, "newer than this meshctl reads"},
		{"applied unknown field", AppliedFile, `{"version": 1, "surprise": true}`, "unknown field"},
		{"report garbage", ReportFile, `not json`, "cannot be read"},
		{"report newer", ReportFile, `{"version": 3}`, "newer than this meshctl reads"},
		{"applied a directory", AppliedFile, "<dir>", "not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := state.Open(filepath.Join(t.TempDir(), "state"))
			if err != nil {
				t.Fatal(err)
			}
			for name, content := range valid {
				if err := os.WriteFile(filepath.Join(d.Path(), name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(d.Path(), tc.file)
			switch {
			case tc.file == "":
				os.Remove(filepath.Join(d.Path(), AppliedFile))
				os.Remove(filepath.Join(d.Path(), ReportFile))
			case tc.content == "<dir>":
				os.Remove(path)
				if err := os.Mkdir(path, 0o700); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			lock, err := d.Lock(context.Background(), "state", state.LockOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Unlock()
			err = CheckRecords(lock)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("CheckRecords = %v, want nil", err)
				}
				return
			}
			var fe *state.FileError
			if !errors.As(err, &fe) || fe.Fault() != fault.BadInput || fe.Path != path || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckRecords = %v, want a FileError (exit 2) naming %s, saying %q", err, path, tc.want)
			}
			if tc.content != "<dir>" {
				if b, _ := os.ReadFile(path); string(b) != tc.content {
					t.Fatalf("%s changed: %q", tc.file, b)
				}
			}
		})
	}
}
