package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// Version is the document version this meshctl reads and writes. A
// document whose format moved on says its own version (Versioned).
const Version = 1

// DefaultPath returns the state directory used when none is configured. That
// is /var/lib/meshctl for root, else $XDG_STATE_HOME/meshctl. With
// XDG_STATE_HOME unset, it is ~/.local/state/meshctl.
func DefaultPath() string {
	if os.Geteuid() == 0 {
		return "/var/lib/meshctl"
	}
	if x := os.Getenv("XDG_STATE_HOME"); x != "" {
		return filepath.Join(x, "meshctl")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return filepath.Join(home, ".local", "state", "meshctl")
}

// Dir is an opened, permission-checked state directory.
type Dir struct {
	path string
	// readOnly is set by Peek. The directory is only read, never created or
	// written, and takes no lock.
	readOnly bool
	// missing is set by Peek when the directory does not exist. It then reads
	// as empty.
	missing bool
	// fsync makes a directory's entries durable (syncDir). Tests record it.
	fsync func(dir string) error
	// beforeRename, if set, runs in Write between the temp file's fsync and
	// its rename. Tests kill a writer there.
	beforeRename func(tmp string)
}

// dirError reports a state directory meshctl refuses to use. It is bad
// input (exit 2), and fix says what to do.
func dirError(path, reason, fix string) error {
	return fault.New(fault.BadInput, "state dir %s %s; %s", path, reason, fix)
}

// pathReason is why a path operation failed. It keeps the path named, which
// may be a parent, as in "mkdir /proc/x: no such file or directory".
func pathReason(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path + ": " + pe.Err.Error()
	}
	return err.Error()
}

// Open checks the state directory at path. It creates the directory when it
// does not exist, mode 0700, with any missing parents. It refuses a directory
// that is group- or world-writable or owned by another user.
func Open(path string) (*Dir, error) {
	return open(path, false, syncDir)
}

// Peek checks the state directory at path for reading only. It never creates
// it, nor anything in it, and the Dir it returns takes no lock. A missing
// directory reads as empty (see Exists). Peek serves the commands that must
// change nothing, status and apply --dry-run.
func Peek(path string) (*Dir, error) {
	return open(path, true, syncDir)
}

func open(path string, readOnly bool, fsync func(string) error) (*Dir, error) {
	if path == "" {
		return nil, dirError(`""`, "is empty", "set --state-dir")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", path, err)
	}
	d := &Dir{path: abs, readOnly: readOnly, fsync: fsync}
	// A symlink is refused, not followed. Whoever can change it steers
	// meshctl to a directory of their choosing. meshctl resolves nothing
	// behind the operator's back, so the fix names the target.
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		fix := "pass the directory itself as --state-dir"
		if target, err := filepath.EvalSymlinks(abs); err == nil {
			fix = "pass the directory itself: --state-dir " + target
		}
		return nil, dirError(abs, "is a symlink; meshctl does not follow a symlinked state dir", fix)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		if readOnly {
			d.missing = true
			return d, nil
		}
		if err := d.mkdirAll(abs); err != nil {
			// Where the state lives is the caller's to say. So a default
			// under a read-only or missing home is a usage error.
			return nil, dirError(abs, "cannot be created ("+pathReason(err)+")",
				"pass --state-dir DIR or set MESHCTL_STATE_DIR to a directory you can create")
		}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, dirError(abs, "cannot be used ("+pathReason(err)+")",
			"pass --state-dir DIR or set MESHCTL_STATE_DIR to a directory")
	}
	if !fi.IsDir() {
		return nil, dirError(abs, "is not a directory", "point --state-dir at a directory")
	}
	if err := checkOwner(abs, fi); err != nil {
		return nil, err
	}
	return d, nil
}

// mkdirAll creates dir and its missing parents, mode 0700. It fsyncs the
// parent of each directory it creates. So a crash cannot lose a directory
// that files were then written into.
func (d *Dir) mkdirAll(dir string) error {
	var missing []string
	for p := dir; ; p = filepath.Dir(p) {
		_, err := os.Stat(p)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		// Mkdir honours the umask, but the contract says 0700 exactly.
		if err := os.Chmod(missing[i], 0o700); err != nil {
			return err
		}
		if err := d.syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs the directory dir.
func (d *Dir) syncDir(dir string) error {
	if d.fsync == nil {
		return syncDir(dir)
	}
	return d.fsync(dir)
}

// Exists reports whether the directory exists. It is false only for a Dir
// from Peek whose directory is missing.
func (d *Dir) Exists() bool { return !d.missing }

// checkOwner checks the state directory itself, as trusted checks each
// directory and file in it. It is stricter, though. The directory must be
// owned by the user meshctl runs as. Root's directory is no other user's to
// use.
func checkOwner(path string, fi os.FileInfo) error {
	if fi.Mode().Perm()&0o022 != 0 {
		return dirError(path, untrusted(fi), "chmod 700 it")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return dirError(path, fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()),
			"chown it to the user that runs meshctl, or use another --state-dir")
	}
	return nil
}

// untrusted says why a directory or file of the state directory cannot be
// trusted, or "" if it can. As sshd checks ~/.ssh, it must be owned by the
// user meshctl runs as or by root. It must be writable by no group and no
// other user. Another user who can write ledger/ could make root's apply
// deploy their image.
func untrusted(fi os.FileInfo) string {
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		who := "group-writable"
		if perm&0o002 != 0 {
			who = "world-writable"
		}
		return "is " + who
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return fmt.Sprintf("is owned by uid %d, not by you (uid %d) or root", st.Uid, os.Geteuid())
	}
	return ""
}

// trusted checks a directory or file inside the state directory (untrusted).
// One that is not trusted is bad input (exit 2), and is left as it is.
func trusted(p string, fi os.FileInfo) error {
	why := untrusted(fi)
	switch perm := fi.Mode().Perm(); {
	case why == "":
		return nil
	case perm&0o022 != 0:
		mode := "600"
		if fi.IsDir() {
			mode = "700"
		}
		return &FileError{Path: p, Err: fmt.Errorf("%s (mode %04o); meshctl trusts nothing another user can write: chmod %s it", why, perm, mode)}
	default:
		return &FileError{Path: p, Err: fmt.Errorf("%s; meshctl trusts nothing another user wrote: check it, then chown it or move it aside", why)}
	}
}

// Path returns the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// join resolves a file name inside the directory. meshctl fixes the names,
// never user input. Still, a name that escapes the directory is refused.
func (d *Dir) join(name string) (string, error) {
	clean := filepath.Clean(name)
	if filepath.IsAbs(clean) || clean == "." || clean == ".." || len(clean) >= 3 && clean[:3] == "../" {
		return "", fmt.Errorf("state file name %q escapes the state dir", name)
	}
	return filepath.Join(d.path, clean), nil
}

// idFile holds the state directory's identity.
const idFile = "id.json"

type idDoc struct {
	Header
	ID string `json:"id"`
}

// ID returns the state directory's identity, made once at random. meshctl
// labels the containers it manages with it. So two state directories on one
// engine never take each other's containers for their own. An example is a
// test run beside a host's own. The identity is made under the lock "id",
// like every other write. So the next writer removes the temp file of one
// killed mid-write.
func (d *Dir) ID() (string, error) {
	if id, ok, err := d.PeekID(); err != nil || ok {
		return id, err
	}
	if d.readOnly {
		return "", fmt.Errorf("state dir %s has no identity yet, and was opened read-only", d.path)
	}
	l, err := d.Lock(context.Background(), idLock, LockOptions{Timeout: idLockWait, What: "state dir identity lock"})
	if err != nil {
		return "", err
	}
	defer l.Unlock()
	// Re-check under the lock, since another process may have made it
	// meanwhile.
	var doc idDoc
	if ok, err := l.Read(idFile, &doc); err != nil || ok && doc.ID != "" {
		return doc.ID, err
	}
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	doc.ID = hex.EncodeToString(b)
	if err := l.Write(idFile, &doc); err != nil {
		return "", err
	}
	return doc.ID, nil
}

// The identity is made under its own lock, held for one small write.
const (
	idLock     = "id"
	idLockWait = 30 * time.Second
)

// PeekID returns the state directory's identity if it has one yet. It never
// makes one, for a dry run must change nothing.
func (d *Dir) PeekID() (string, bool, error) {
	var doc idDoc
	ok, err := d.Read(idFile, &doc)
	return doc.ID, ok && doc.ID != "", err
}
