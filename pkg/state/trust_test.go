package state

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/fault"
)

// TestTrustBoundary: every directory and file meshctl
// reads or writes in the state directory must be owned by the user meshctl
// runs as (or root) and writable by no group or other user, as sshd checks
// ~/.ssh; else exit 2 naming it, and nothing is read from or written
// through it. The top directory at 0711 is fine; a world-writable ledger/
// under it is not.
func TestTrustBoundary(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown to nobody")
	}
	const nobody = 65534
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		do    func(d *Dir) error
		want  string
	}{
		{"world-writable ledger/", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, "ledger"), 0o777))
		}, readLedger, "ledger is world-writable (mode 0777)"},
		{"group-writable ledger/, listed", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, "ledger"), 0o770))
		}, func(d *Dir) error { _, err := d.List("ledger", ".json"); return err }, "ledger is group-writable"},
		{"ledger/ owned by nobody, written into", func(t *testing.T, dir string) {
			must(t, os.Chown(filepath.Join(dir, "ledger"), nobody, nobody))
		}, func(d *Dir) error {
			return update(context.Background(), d, "ledger", "ledger/web.module.json", LockOptions{}, &counter{}, func() error { return nil })
		}, "ledger is owned by uid 65534"},
		{"a file owned by nobody", func(t *testing.T, dir string) {
			must(t, os.Chown(filepath.Join(dir, "ledger", "web.module.json"), nobody, nobody))
		}, readLedger, "web.module.json is owned by uid 65534, not by you (uid 0) or root"},
		{"a world-writable file", func(t *testing.T, dir string) {
			must(t, os.Chmod(filepath.Join(dir, "ledger", "web.module.json"), 0o666))
		}, readLedger, "web.module.json is world-writable (mode 0666); meshctl trusts nothing another user can write: chmod 600 it"},
		{"window-logs/ owned by nobody", func(t *testing.T, dir string) {
			must(t, os.Mkdir(filepath.Join(dir, "window-logs"), 0o700))
			must(t, os.WriteFile(filepath.Join(dir, "window-logs", "w-1.json"), []byte(`{"version": 1, "n": 1}`), 0o600))
			must(t, os.Chown(filepath.Join(dir, "window-logs"), nobody, nobody))
		}, func(d *Dir) error { _, err := d.Read("window-logs/w-1.json", &counter{}); return err }, "window-logs is owned by uid 65534"},
		{"a group-writable top-level file", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "holds.json"), []byte(`{"version": 1, "n": 1}`), 0o600))
			must(t, os.Chmod(filepath.Join(dir, "holds.json"), 0o620))
		}, func(d *Dir) error { _, err := d.Read("holds.json", &counter{}); return err }, "holds.json is group-writable"},
		{"a world-writable lock file", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "state.lock"), nil, 0o600))
			must(t, os.Chmod(filepath.Join(dir, "state.lock"), 0o666))
		}, func(d *Dir) error {
			l, err := d.Lock(context.Background(), "state", LockOptions{})
			l.Unlock()
			return err
		}, "state.lock is world-writable"},
		{"a lock file owned by nobody, checked for liveness", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "window-w-1.lock"), nil, 0o600))
			must(t, os.Chown(filepath.Join(dir, "window-w-1.lock"), nobody, nobody))
		}, func(d *Dir) error { _, err := d.Held("window-w-1"); return err }, "window-w-1.lock is owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			d, err := Open(dir)
			must(t, err)
			// The top at 0711, as in the issue: only its own mode was checked.
			must(t, os.Chmod(dir, 0o711))
			must(t, update(context.Background(), d, "ledger", "ledger/web.module.json", LockOptions{}, &counter{}, func() error { return nil }))
			tt.setup(t, dir)
			d, err = Open(dir)
			must(t, err) // the top itself is fine
			err = tt.do(d)
			var fe *FileError
			if !errors.As(err, &fe) || fe.Fault() != fault.BadInput || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v (%T), want a FileError (exit 2) saying %q", err, err, tt.want)
			}
		})
	}
}

func readLedger(d *Dir) error {
	_, err := d.Read("ledger/web.module.json", &counter{})
	return err
}

// TestTrustRootOwned: a file owned by root is trusted whoever runs meshctl,
// as sshd trusts a root-owned ~/.ssh; one of the invoking user's too.
func TestTrustRootOwned(t *testing.T) {
	d := openTemp(t)
	must(t, update(context.Background(), d, "c", "c.json", LockOptions{}, &counter{}, func() error { return nil }))
	if _, err := d.Read("c.json", &counter{}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(d.Path(), "c.json"))
	must(t, err)
	if why := untrusted(fi); why != "" {
		t.Errorf("own file untrusted: %s", why)
	}
}

// TestOpenRefusesSymlink: a --state-dir that is a symlink
// is refused, exit 2, naming its target, by Open and Peek alike; nothing is
// created through it.
func TestOpenRefusesSymlink(t *testing.T) {
	base := t.TempDir()
	target := filepath.Join(base, "real")
	must(t, os.Mkdir(target, 0o700))
	link := filepath.Join(base, "state")
	must(t, os.Symlink(target, link))
	for name, open := range map[string]func(string) (*Dir, error){"Open": Open, "Peek": Peek} {
		_, err := open(link)
		var de *DirError
		if !errors.As(err, &de) || de.Fault() != fault.BadInput ||
			!strings.Contains(err.Error(), "is a symlink") || !strings.Contains(err.Error(), "--state-dir "+target) {
			t.Errorf("%s: err = %v, want a DirError naming the symlink and its target", name, err)
		}
	}
	// A dangling one too: never created through.
	dangling := filepath.Join(base, "dangling")
	must(t, os.Symlink(filepath.Join(base, "nowhere"), dangling))
	if _, err := Open(dangling); err == nil || !strings.Contains(err.Error(), "is a symlink") {
		t.Errorf("dangling: err = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(base, "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("created through a dangling symlink: %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
