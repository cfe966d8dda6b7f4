package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

type counter struct {
	Header
	N int `json:"n"`
}

func openTemp(t *testing.T) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestOpenCreatesPrivateDir(t *testing.T) {
	old := umask(0)
	defer umask(old)
	p := filepath.Join(t.TempDir(), "a", "b", "state")
	if _, err := Open(p); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("mode = %o, want 700", fi.Mode().Perm())
	}
}

func TestOpenRefusesWritableByOthers(t *testing.T) {
	for _, mode := range []os.FileMode{0o770, 0o707, 0o777} {
		p := filepath.Join(t.TempDir(), "state")
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		var de *fault.Error
		if !errors.As(err, &de) || de.Fault() != fault.BadInput || !strings.Contains(err.Error(), "chmod 700") {
			t.Errorf("mode %o: err = %v, want a state dir error saying chmod 700", mode, err)
		}
	}
}

func TestOpenRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown")
	}
	p := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p)
	if err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Fatalf("err = %v, want owned by uid 65534", err)
	}
}

func TestUpdateAndRead(t *testing.T) {
	d := openTemp(t)
	for i := 0; i < 3; i++ {
		var c counter
		if err := update(context.Background(), d, "count", "count.json", LockOptions{}, &c, func() error { c.N++; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var c counter
	ok, err := d.Read("count.json", &c)
	if err != nil || !ok || c.N != 3 || c.Version != 1 {
		t.Fatalf("read = %+v, %v, %v", c, ok, err)
	}
	fi, err := os.Stat(filepath.Join(d.Path(), "count.json"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode = %o, want 600", fi.Mode().Perm())
	}
}

func TestUpdateChangeErrorWritesNothing(t *testing.T) {
	d := openTemp(t)
	var c counter
	boom := errors.New("boom")
	err := update(context.Background(), d, "count", "count.json", LockOptions{}, &c, func() error { c.N = 7; return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "count.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file written after a failed change: %v", err)
	}
}

func TestReadRefusesBadFilesAndNeverOverwrites(t *testing.T) {
	cases := map[string]string{
		"garbage":       "{not json",
		"no version":    `{"n": 1}`,
		"newer version": `{"version": 2, "n": 1}`,
		"unknown field": `{"version": 1, "n": 1, "extra": true}`,
		"two documents": `{"version": 1, "n": 1} {"version": 1}`,
		"empty":         ``,
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			d := openTemp(t)
			p := filepath.Join(d.Path(), "count.json")
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			var c counter
			err := update(context.Background(), d, "count", "count.json", LockOptions{}, &c, func() error { c.N = 99; return nil })
			var fe *FileError
			if !errors.As(err, &fe) || fe.Fault() != fault.BadInput || !strings.Contains(err.Error(), p) {
				t.Fatalf("err = %v, want a FileError naming %s", err, p)
			}
			got, _ := os.ReadFile(p)
			if string(got) != content {
				t.Fatalf("file was overwritten: %q", got)
			}
		})
	}
}

// TestVersionOnlyChecksParseAndVersion: a file read as VersionOnly must
// parse and be of a version this meshctl reads; what else it holds is not
// decoded.
func TestVersionOnlyChecksParseAndVersion(t *testing.T) {
	for content, ok := range map[string]bool{
		`{"version": 1, "report": {"containers": [{"name": "a"}]}}`: true,
		`{"version": 1, "report": {"containers": [`:                 false,
		`{"version": 2}`:                false,
		`{"report": null}`:              false,
		`{"version": 1} {"version": 1}`: false,
	} {
		d := openTemp(t)
		if err := os.WriteFile(filepath.Join(d.Path(), "r.json"), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		var v VersionOnly
		found, err := d.Read("r.json", &v)
		var fe *FileError
		switch {
		case ok && (err != nil || !found || v.Version != 1):
			t.Errorf("%s: %v, %v, version %d; want it read, version 1", content, found, err, v.Version)
		case !ok && !errors.As(err, &fe):
			t.Errorf("%s: %v; want a FileError", content, err)
		}
	}
}

func TestNewerVersionSaysUpgrade(t *testing.T) {
	d := openTemp(t)
	os.WriteFile(filepath.Join(d.Path(), "count.json"), []byte(`{"version": 2}`), 0o600)
	_, err := d.Read("count.json", &counter{})
	if err == nil || !strings.Contains(err.Error(), "upgrade meshctl") {
		t.Fatalf("err = %v", err)
	}
}

func TestNeverFollowsSymlinks(t *testing.T) {
	d := openTemp(t)
	target := filepath.Join(t.TempDir(), "elsewhere.json")
	os.WriteFile(target, []byte(`{"version": 1, "n": 5}`), 0o600)
	if err := os.Symlink(target, filepath.Join(d.Path(), "count.json")); err != nil {
		t.Fatal(err)
	}
	var c counter
	if _, err := d.Read("count.json", &c); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("read through a symlink: err = %v", err)
	}
	err := update(context.Background(), d, "count", "count.json", LockOptions{}, &c, func() error { c.N = 1; return nil })
	if err == nil {
		t.Fatal("update through a symlink succeeded")
	}
	got, _ := os.ReadFile(target)
	if string(got) != `{"version": 1, "n": 5}` {
		t.Fatalf("symlink target changed: %s", got)
	}
	// A symlinked lock file is refused too.
	if err := os.Symlink(target, filepath.Join(d.Path(), "other.lock")); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lock(context.Background(), "other", LockOptions{}); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("lock through a symlink: err = %v", err)
	}
}

func TestBusyNamesHolderAndHonoursTimeout(t *testing.T) {
	d := openTemp(t)
	l, err := d.Lock(context.Background(), "state", LockOptions{Command: "meshctl apply -f x.yaml"})
	if err != nil {
		t.Fatal(err)
	}
	// A second open file description contends like another process would.
	start := time.Now()
	_, err = d.Lock(context.Background(), "state", LockOptions{Timeout: 300 * time.Millisecond, What: "state lock"})
	waited := time.Since(start)
	var be *BusyError
	if !errors.As(err, &be) || be.Fault() != fault.Busy {
		t.Fatalf("err = %v, want BusyError", err)
	}
	if be.Holder.PID != os.Getpid() || !strings.Contains(err.Error(), "meshctl apply -f x.yaml") || !strings.Contains(err.Error(), "state lock") {
		t.Fatalf("busy error does not name the holder: %v", err)
	}
	if waited < 300*time.Millisecond {
		t.Fatalf("gave up after %s, before the timeout", waited)
	}
	held, err := d.Held("state")
	if err != nil || !held {
		t.Fatalf("Held = %v, %v", held, err)
	}
	l.Unlock()
	if held, _ := d.Held("state"); held {
		t.Fatal("Held after Unlock")
	}
	l2, err := d.Lock(context.Background(), "state", LockOptions{})
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
}

func TestLockWaitsForRelease(t *testing.T) {
	d := openTemp(t)
	l, _ := d.Lock(context.Background(), "state", LockOptions{})
	go func() { time.Sleep(100 * time.Millisecond); l.Unlock() }()
	l2, err := d.Lock(context.Background(), "state", LockOptions{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("lock was not had after release: %v", err)
	}
	l2.Unlock()
}

func TestStaleTempsRemovedUnderLock(t *testing.T) {
	d := openTemp(t)
	mine := filepath.Join(d.Path(), ".count.json.tmp-count-123")
	other := filepath.Join(d.Path(), ".ledger.json.tmp-ledger-456")
	sub := filepath.Join(d.Path(), "ledger")
	os.Mkdir(sub, 0o700)
	mineSub := filepath.Join(sub, ".m.json.tmp-count-789")
	for _, p := range []string{mine, other, mineSub} {
		os.WriteFile(p, []byte("half"), 0o600)
	}
	l, err := d.Lock(context.Background(), "count", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	for _, p := range []string{mine, mineSub} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stale temp %s not removed", p)
		}
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another lock's temp file was removed: %v", err)
	}
}

func TestIDIsStable(t *testing.T) {
	d := openTemp(t)
	if _, ok, _ := d.PeekID(); ok {
		t.Fatal("a new state dir has an id before one is asked for")
	}
	a, err := d.ID()
	if err != nil || a == "" {
		t.Fatalf("ID = %q, %v", a, err)
	}
	b, _ := d.ID()
	if a != b {
		t.Fatalf("ID changed: %s then %s", a, b)
	}
}
