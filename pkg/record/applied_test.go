package record

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/mesh"
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
			err = checkRecords(lock)
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

// checkRecords reads, under lock, the two files an apply replaces, as an
// apply does: applied.json (its previous state), then last-apply.json
// (CheckReport).
func checkRecords(lock *state.Lock) error {
	if _, err := lock.Read(AppliedFile, &Applied{}); err != nil {
		return err
	}
	return CheckReport(lock)
}

// TestMergeKeepsOtherModules: the applied state after an apply keeps the
// modules its file does not name, with their images and records, drops the
// removed ones, and takes the file's.
func TestMergeKeepsOtherModules(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Hour)
	c := &mesh.Container{Image: "meshtest/busybox:1"}
	prev := &Applied{AppliedAt: t0, Source: "/old.yaml",
		File: &mesh.File{Modules: map[string]*mesh.Module{
			"a": {Containers: map[string]*mesh.Container{"x": c}},
			"b": {Containers: map[string]*mesh.Container{"y": c}},
			"c": {Containers: map[string]*mesh.Container{"z": c}}}},
		Images: map[string]Resolved{"a.x": {Image: "i1"}, "b.y": {Image: "i2"}, "c.z": {Image: "i3"}}}
	f := &mesh.File{Modules: map[string]*mesh.Module{"b": {Containers: map[string]*mesh.Container{"w": c}}}}
	desired, err := Desire(f, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := prev.Merge(f, []string{"c"}, desired, "/b.yaml", t1, ThisSource)
	if names := got.ModuleNames(); !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("modules %v, want [a b]", names)
	}
	if _, ok := got.File.Modules["b"].Containers["y"]; ok {
		t.Error("b.y kept: the file's module replaces the applied one")
	}
	if got.Images["a.x"].Image != "i1" || got.Images["b.w"].Image != "meshtest/busybox:1" || len(got.Images) != 2 {
		t.Errorf("images %v", got.Images)
	}
	if r := got.Modules["a"]; r.Source != "/old.yaml" || !r.AppliedAt.Equal(t0) {
		t.Errorf("module a's record %+v, want the old one", r)
	}
	if r := got.Modules["b"]; r.Source != "/b.yaml" || !r.AppliedAt.Equal(t1) {
		t.Errorf("module b's record %+v", r)
	}
}
