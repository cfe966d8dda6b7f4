package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// Holder says who holds a lock. The process that takes the lock writes it
// into the lock file, so a waiter can name it.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
}

func (h Holder) String() string {
	if h.PID == 0 {
		return "an unknown process"
	}
	return fmt.Sprintf("pid %d (%s) since %s", h.PID, h.Command, When(h.Since))
}

// BusyError reports a lock that was not had in time (exit 3).
type BusyError struct {
	Lock   string
	Holder Holder
	Waited time.Duration
}

func (e *BusyError) Error() string {
	wait := "did not wait (--lock-timeout=0)"
	if e.Waited > 0 {
		wait = "waited " + e.Waited.String()
	}
	return fmt.Sprintf("%s is busy: held by %s; %s; retry later or raise --lock-timeout", e.Lock, e.Holder, wait)
}

// Fault says a busy lock is busy.
func (e *BusyError) Fault() fault.Kind { return fault.Busy }

// Lock is an exclusive OS file lock (flock) on a lock file in the state
// directory. Files are read and written under it with Read and Write.
type Lock struct {
	dir  *Dir
	name string
	f    *os.File
}

// LockOptions says how long to wait for a lock and how to describe it.
type LockOptions struct {
	// Timeout is how long to wait. Zero tries once.
	Timeout time.Duration
	// What names the lock in a busy error ("state lock"). It defaults to the
	// file name.
	What string
	// Command describes the holder in the lock file, for the busy errors of
	// others. It defaults to this process's command line
	// (CommandLine(os.Args)).
	Command string
	// Waiting, if set, is told once when the lock is busy and Lock waits for
	// it. It is told after a short grace, so brief contention says nothing. A
	// person at a terminal then sees who they are waiting for.
	Waiting func(what string, holder Holder)
}

// waitingGrace is how long a lock is waited for before Waiting is told.
const waitingGrace = 250 * time.Millisecond

// CommandLine describes a process by its arguments for a lock file. It gives
// the program's base name and its arguments, as in "meshctl apply -f
// mesh.yaml".
func CommandLine(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return strings.Join(append([]string{filepath.Base(args[0])}, args[1:]...), " ")
}

// Lock takes the exclusive lock name, a file "name.lock" in the directory. It
// waits up to opts.Timeout. A lock not had in time is a *BusyError naming its
// holder. Once the lock is held, Lock removes stale temp files of its
// writers. Every writer of those files holds this lock. So any left over are
// from a process that died mid-write.
func (d *Dir) Lock(ctx context.Context, name string, opts LockOptions) (*Lock, error) {
	if d.readOnly {
		return nil, fmt.Errorf("state dir %s was opened read-only: cannot take its %s lock", d.path, name)
	}
	f, err := d.openLockFile(name)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	delay := 5 * time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		waited := time.Since(start)
		what := opts.What
		if what == "" {
			what = name + " lock"
		}
		if waited >= opts.Timeout {
			holder := readHolder(f)
			f.Close()
			return nil, &BusyError{Lock: what, Holder: holder, Waited: opts.Timeout}
		}
		if opts.Waiting != nil && waited >= waitingGrace {
			opts.Waiting(what, readHolder(f))
			opts.Waiting = nil // once
		}
		t := time.NewTimer(min(delay, opts.Timeout-waited))
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
	l := &Lock{dir: d, name: name, f: f}
	noteLock(+1)
	cmd := opts.Command
	if cmd == "" {
		cmd = CommandLine(os.Args)
	}
	l.writeHolder(cmd)
	l.removeStaleTemps()
	return l, nil
}

// TryLock takes the lock name if it is free. If another process holds it,
// TryLock reports false with a nil error.
func (d *Dir) TryLock(name string) (*Lock, bool, error) {
	l, err := d.Lock(context.Background(), name, LockOptions{})
	var busy *BusyError
	if errors.As(err, &busy) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return l, true, nil
}

// Held reports whether some process holds the lock name right now. It does
// so by trying a shared lock, so it never disturbs the holder.
func (d *Dir) Held(name string) (bool, error) {
	p, err := d.join(name + ".lock")
	if err != nil {
		return false, err
	}
	if err := d.checkParents(p); err != nil {
		return false, err
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if errors.Is(err, syscall.ELOOP) {
		return false, symlinkError(p)
	}
	if err != nil {
		return false, unreadable(p, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return false, unreadable(p, err)
	} else if err := trusted(p, fi); err != nil {
		return false, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("lock %s: %w", p, err)
	}
	return false, nil
}

// HolderOf reads who holds, or last held, the lock name.
func (d *Dir) HolderOf(name string) Holder {
	p, err := d.join(name + ".lock")
	if err != nil {
		return Holder{}
	}
	if d.checkParents(p) != nil {
		return Holder{}
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Holder{}
	}
	defer f.Close()
	return readHolder(f)
}

// RemoveLockFile removes the lock file name. It serves locks named after
// short-lived things, such as a window. Call it while holding the lock, just
// before Unlock.
func (l *Lock) RemoveLockFile() error {
	p, err := l.dir.join(l.name + ".lock")
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Unlock releases the lock. The lock file stays. Removing it would let two
// processes lock two different files of the same name.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	noteLock(-1)
	return err
}

// What this process does with the state directory's locks. These count the
// locks it holds, and when it last took or released one (unix nanoseconds). A
// lock is per process, and so is this.
var (
	locksHeld    atomic.Int64
	lastLockNano atomic.Int64
)

func noteLock(delta int64) {
	locksHeld.Add(delta)
	lastLockNano.Store(time.Now().UnixNano())
}

// LockActivity reports how many state directory locks this process holds. It
// also reports when it last took or released one, zero if never. Every change
// to the state directory is made under a lock. Every change to the engine is
// made under a window's or an apply's claim. So an interrupted command that
// neither holds nor takes a lock is stuck, not cleaning up.
func LockActivity() (held int64, last time.Time) {
	held = locksHeld.Load()
	if n := lastLockNano.Load(); n != 0 {
		last = time.Unix(0, n)
	}
	return held, last
}

// Dir returns the state directory the lock belongs to.
func (l *Lock) Dir() *Dir { return l.dir }

func (d *Dir) openLockFile(name string) (*os.File, error) {
	p, err := d.join(name + ".lock")
	if err != nil {
		return nil, err
	}
	if err := d.mkdirFor(p); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, symlinkError(p)
		}
		return nil, &FileError{Path: p, Err: fmt.Errorf("cannot be opened as a lock file: %w; move it aside", err)}
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, &FileError{Path: p, Err: errors.New("is not a regular file; move it aside")}
	}
	if err := trusted(p, fi); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (l *Lock) writeHolder(cmd string) {
	h := Holder{PID: os.Getpid(), Command: cmd, Since: time.Now().UTC().Truncate(time.Second)}
	b, _ := json.Marshal(h)
	// Best effort, since the holder line only serves error messages.
	if err := l.f.Truncate(0); err == nil {
		_, _ = l.f.WriteAt(append(b, '\n'), 0)
	}
}

func readHolder(f *os.File) Holder {
	b, err := io.ReadAll(io.NewSectionReader(f, 0, 4096))
	if err != nil {
		return Holder{}
	}
	var h Holder
	if json.Unmarshal(b, &h) != nil {
		return Holder{}
	}
	return h
}

func (l *Lock) removeStaleTemps() {
	marker := ".tmp-" + l.name + "-"
	dirs := []string{l.dir.path}
	entries, _ := os.ReadDir(l.dir.path)
	for _, e := range entries {
		if e.IsDir() { // DirEntry.IsDir is false for a symlink: never followed
			dirs = append(dirs, filepath.Join(l.dir.path, e.Name()))
		}
	}
	for _, dir := range dirs {
		files, _ := os.ReadDir(dir)
		for _, f := range files {
			if strings.HasPrefix(f.Name(), ".") && strings.Contains(f.Name(), marker) {
				_ = os.Remove(filepath.Join(dir, f.Name()))
			}
		}
	}
}

func symlinkError(p string) error {
	return &FileError{Path: p, Err: errors.New("is a symlink; meshctl never follows symlinks in its state dir, remove it")}
}
