package state

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// The promises of CONTRACT §9 on every path: created directories are
// durable, a read-only open creates nothing, nothing is read through a
// symlinked directory, an unreadable file is bad input (exit 2), and a
// writer killed mid-write leaves no temp file once the next one has run.

// recordSyncs returns an fsync seam that records the directories synced.
func recordSyncs() (*[]string, func(string) error) {
	var synced []string
	return &synced, func(dir string) error {
		synced = append(synced, dir)
		return syncDir(dir)
	}
}

func TestCreatedDirsParentsAreFsynced(t *testing.T) {
	base := t.TempDir()
	p := filepath.Join(base, "a", "b", "state")
	synced, fsync := recordSyncs()
	d, err := open(p, false, fsync)
	if err != nil {
		t.Fatal(err)
	}
	for _, parent := range []string{base, filepath.Join(base, "a"), filepath.Join(base, "a", "b")} {
		if !slices.Contains(*synced, parent) {
			t.Errorf("%s was created in %s, which was never fsynced (synced: %v)", filepath.Base(parent), parent, *synced)
		}
	}

	// A subdirectory (ledger/) made for a file: the state dir is fsynced
	// once it has the new entry.
	*synced = nil
	l, err := d.Lock(context.Background(), "ledger", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Write("ledger/index.json", &counter{N: 1}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(*synced, d.Path()) {
		t.Errorf("ledger/ was created, but the state dir was never fsynced (synced: %v)", *synced)
	}
}

func TestPeekCreatesNothing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state")
	d, err := Peek(p)
	if err != nil {
		t.Fatal(err)
	}
	if d.Exists() {
		t.Error("Exists() = true for a missing dir")
	}
	var c counter
	if ok, err := d.Read("applied.json", &c); ok || err != nil {
		t.Errorf("Read = %v, %v; want false, nil", ok, err)
	}
	if ok, err := d.Read("ledger/index.json", &c); ok || err != nil {
		t.Errorf("Read ledger/ = %v, %v; want false, nil", ok, err)
	}
	if names, err := d.List("ledger", ".json"); len(names) != 0 || err != nil {
		t.Errorf("List = %v, %v", names, err)
	}
	if _, ok, err := d.PeekID(); ok || err != nil {
		t.Errorf("PeekID = %v, %v", ok, err)
	}
	if held, err := d.Held("state"); held || err != nil {
		t.Errorf("Held = %v, %v", held, err)
	}
	if _, err := d.ID(); err == nil {
		t.Error("ID made an identity in a read-only dir")
	}
	if _, err := d.Lock(context.Background(), "state", LockOptions{}); err == nil {
		t.Error("Lock succeeded on a read-only dir")
	}
	if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state dir was created: %v", err)
	}

	// An existing dir: still nothing made in it, not even its identity.
	if _, err := Open(p); err != nil {
		t.Fatal(err)
	}
	d, err = Peek(p)
	if err != nil || !d.Exists() {
		t.Fatalf("Peek = %v, exists %v", err, d != nil && d.Exists())
	}
	_, _ = d.ID()
	_, _ = d.Held("state")
	if entries, _ := os.ReadDir(p); len(entries) != 0 {
		t.Fatalf("Peek made files: %v", entries)
	}

	// And its permissions are checked as Open checks them.
	if err := os.Chmod(p, 0o777); err != nil {
		t.Fatal(err)
	}
	var de *fault.Error
	if _, err := Peek(p); !errors.As(err, &de) {
		t.Fatalf("Peek of a world-writable dir: err = %v", err)
	}
}

func TestSymlinkedSubdirRefusedOnRead(t *testing.T) {
	d := openTemp(t)
	elsewhere := t.TempDir()
	if err := os.WriteFile(filepath.Join(elsewhere, "index.json"), []byte(`{"version": 1, "n": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(d.Path(), "ledger")
	if err := os.Symlink(elsewhere, link); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var fe *FileError
		if !errors.As(err, &fe) || fe.Fault() != fault.BadInput || fe.Path != link || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%s through a symlinked ledger/: err = %v, want a FileError naming %s", what, err, link)
		}
	}
	var c counter
	_, err := d.Read("ledger/index.json", &c)
	check("Read", err)
	_, err = d.List("ledger", ".json")
	check("List", err)
	l, err := d.Lock(context.Background(), "ledger", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	_, err = l.Read("ledger/index.json", &c)
	check("Lock.Read", err)
	check("Write", l.Write("ledger/index.json", &c))
}

func TestUnreadableFileIsBadInput(t *testing.T) {
	d := openTemp(t)
	if err := os.Mkdir(filepath.Join(d.Path(), "applied.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d.Path(), "holds.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.Path(), "ledger"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(d.Path(), "state.lock"), 0o700); err != nil {
		t.Fatal(err)
	}
	check := func(what, path string, err error) {
		t.Helper()
		var fe *FileError
		if !errors.As(err, &fe) || fe.Fault() != fault.BadInput || fe.Path != filepath.Join(d.Path(), path) {
			t.Errorf("%s: err = %v, want a FileError (exit 2) naming %s", what, err, path)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var c counter
		_, err := d.Read("applied.json", &c)
		check("a directory in a file's place", "applied.json", err)
		_, err = d.Read("holds.json", &c)
		check("a FIFO in a file's place", "holds.json", err)
		_, err = d.Read("ledger/index.json", &c)
		check("a file in ledger/'s place", "ledger", err)
		_, err = d.List("ledger", ".json")
		check("List of a file", "ledger", err)
		_, err = d.Lock(context.Background(), "state", LockOptions{})
		check("a directory in a lock file's place", "state.lock", err)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a read blocked (on the FIFO?)")
	}
}

func TestCommandLineNamesTheProgramByBaseName(t *testing.T) {
	if got := CommandLine([]string{"/usr/local/bin/meshctl", "apply", "-f", "x.yaml"}); got != "meshctl apply -f x.yaml" {
		t.Fatalf("CommandLine = %q", got)
	}
	d := openTemp(t)
	l, err := d.Lock(context.Background(), "state", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if h := d.HolderOf("state"); h.Command != CommandLine(os.Args) || h.PID != os.Getpid() {
		t.Fatalf("holder = %+v, want this process, %q", h, CommandLine(os.Args))
	}
}

// childStall writes $FILE under the lock $LOCK (the identity when FILE is
// id.json) and stops between the temp file's fsync and its rename, saying
// so on stdout, to be killed there.
func childStall() int {
	d, err := Open(os.Getenv("MESHCTL_STATE_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	d.beforeRename = func(string) {
		fmt.Println("stalled")
		time.Sleep(time.Hour)
	}
	file := os.Getenv("FILE")
	if file == idFile {
		_, err = d.ID()
	} else {
		err = update(context.Background(), d, os.Getenv("LOCK"), file, LockOptions{}, &counter{}, func() error { return nil })
	}
	fmt.Fprintln(os.Stderr, "the write did not stall:", err)
	return 1
}

// TestKilledWriterLeavesNoTemp kills writers between the write of their
// temp file and its rename: the identity's, a top-level file's and a
// ledger file's. The next writer of each removes the temp file.
func TestKilledWriterLeavesNoTemp(t *testing.T) {
	for _, tc := range []struct{ lock, file string }{
		{idLock, idFile},
		{"state", "applied.json"},
		{"ledger", "ledger/index.json"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			d, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			cmd := child(t, "stall", dir, "LOCK="+tc.lock, "FILE="+tc.file)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if line != "stalled\n" {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the child did not stall mid-write: %q, %v", line, err)
			}
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if temps := tempsIn(t, dir); len(temps) == 0 {
				t.Fatal("no temp file after the kill: the kill was not mid-write")
			}

			// The next writer of the same file.
			if tc.file == idFile {
				_, err = d.ID()
			} else {
				err = update(context.Background(), d, tc.lock, tc.file, LockOptions{}, &counter{}, func() error { return nil })
			}
			if err != nil {
				t.Fatal(err)
			}
			if temps := tempsIn(t, dir); len(temps) > 0 {
				t.Fatalf("temp files left after the next write: %v", temps)
			}
		})
	}
}

func tempsIn(t *testing.T, dir string) []string {
	t.Helper()
	var temps []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(e.Name(), ".tmp") {
			temps = append(temps, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return temps
}
