package apply

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// TestNoOpApplyKeepsApplied: applied.json's applied_at is the last change
// (CONTRACT §5): an apply that changes nothing leaves the file as it is,
// not even rewritten (the same inode), and records the time of its check
// in last-apply.json only; apply --last of the unchanged state too. An
// apply that changes one module rewrites it, the other module keeping its
// time.
func TestNoOpApplyKeepsApplied(t *testing.T) {
	d, f := stateDir(t), enginetest.NewFake(busybox)
	t1 := time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC)
	at := func(tm time.Time) func(*Options) { return func(o *Options) { o.Now = func() time.Time { return tm } } }
	one := meshOf(t, "a: {image: "+busybox+"}")
	if _, err := run(t, d, f, one, at(t1)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.Path(), record.AppliedFile)
	before, ino := readIno(t, path)

	t2 := t1.Add(time.Hour)
	if _, err := run(t, d, f, one, at(t2)); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, d, f, nil, func(o *Options) { o.Last, o.Now = true, func() time.Time { return t2 } }); err != nil {
		t.Fatal(err)
	}
	after, ino2 := readIno(t, path)
	if string(after) != string(before) || ino2 != ino {
		t.Errorf("a no-op apply rewrote %s:\n%s\nwas\n%s", record.AppliedFile, after, before)
	}
	var last record.LastReport
	if _, err := d.Read(record.ReportFile, &last); err != nil {
		t.Fatal(err)
	}
	if !last.FinishedAt.Equal(t2) {
		t.Errorf("last-apply.json finished_at %s, want the check's time %s", last.FinishedAt, t2)
	}

	// A second module: applied.json changes; m keeps its time.
	t3 := t2.Add(time.Hour)
	two := meshOf(t, "a: {image: "+busybox+"}")
	other, err := mesh.Decode("n.yaml", []byte("modules:\n  n:\n    containers:\n      b: {image: "+busybox+"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	two.Modules["n"] = other.Modules["n"]
	if _, err := run(t, d, f, two, at(t3)); err != nil {
		t.Fatal(err)
	}
	var a record.Applied
	if _, err := d.Read(record.AppliedFile, &a); err != nil {
		t.Fatal(err)
	}
	if !a.AppliedAt.Equal(t3) || !a.Modules["m"].AppliedAt.Equal(t1) || !a.Modules["n"].AppliedAt.Equal(t3) {
		t.Errorf("applied_at %s, m %s, n %s; want %s, %s (unchanged since), %s", a.AppliedAt, a.Modules["m"].AppliedAt,
			a.Modules["n"].AppliedAt, t3, t1, t3)
	}
}

func readIno(t *testing.T, path string) ([]byte, uint64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, fi.Sys().(*syscall.Stat_t).Ino
}
