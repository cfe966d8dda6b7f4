// Package state owns meshctl's state directory: its location and
// permissions, the OS file locks that serialise meshctl processes, and the
// atomic, versioned JSON files they share.
//
// Every file is a JSON object carrying "version": 1. Writers hold a lock on a
// separate, stable lock file (never the file they replace), write a temp file,
// fsync it, rename it over the target and fsync the directory, so a reader
// never sees a torn file and a kill -9 at any instant leaves every file whole.
package state

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// Version is the only document version this meshctl reads and writes.
const Version = 1

// DefaultPath returns the state directory used when none is configured:
// /var/lib/meshctl for root, else $XDG_STATE_HOME/meshctl
// (~/.local/state/meshctl when XDG_STATE_HOME is unset).
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
}

// DirError reports a state directory meshctl refuses to use; it is bad
// input (exit 2) and its message says how to fix it.
type DirError struct {
	Path   string
	Reason string
	Fix    string
}

func (e *DirError) Error() string {
	msg := fmt.Sprintf("state dir %s %s", e.Path, e.Reason)
	if e.Fix != "" {
		msg += "; " + e.Fix
	}
	return msg
}

// ExitCode maps a refused state directory to exit status 2.
func (e *DirError) ExitCode() int { return 2 }

// Open checks the state directory at path, creating it (mode 0700, with any
// missing parents) when it does not exist. It refuses a directory that is
// group- or world-writable or owned by another user.
func Open(path string) (*Dir, error) {
	if path == "" {
		return nil, &DirError{Path: `""`, Reason: "is empty", Fix: "set --state-dir"}
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(abs, 0o700); err != nil {
			return nil, fmt.Errorf("create state dir %s: %w", abs, err)
		}
		// MkdirAll honours the umask; the contract says 0700 exactly.
		if err := os.Chmod(abs, 0o700); err != nil {
			return nil, fmt.Errorf("create state dir %s: %w", abs, err)
		}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("state dir %s: %w", abs, err)
	}
	if !fi.IsDir() {
		return nil, &DirError{Path: abs, Reason: "is not a directory", Fix: "point --state-dir at a directory"}
	}
	if err := checkOwner(abs, fi); err != nil {
		return nil, err
	}
	return &Dir{path: abs}, nil
}

func checkOwner(path string, fi os.FileInfo) error {
	if fi.Mode().Perm()&0o022 != 0 {
		who := "group-writable"
		if fi.Mode().Perm()&0o002 != 0 {
			who = "world-writable"
		}
		return &DirError{Path: path, Reason: "is " + who, Fix: "chmod 700 it"}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return &DirError{Path: path,
			Reason: fmt.Sprintf("is owned by uid %d, not by you (uid %d)", st.Uid, os.Geteuid()),
			Fix:    "chown it to the user that runs meshctl, or use another --state-dir"}
	}
	return nil
}

// Path returns the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// join resolves a file name inside the directory. Names are fixed by meshctl
// (never user input), but a name that escapes the directory is still refused.
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
// labels the containers it manages with it, so that two state directories
// on one engine (a test run beside a host's own) never take each other's
// containers for their own.
func (d *Dir) ID() (string, error) {
	var doc idDoc
	for range 3 {
		ok, err := d.Read(idFile, &doc)
		if err != nil {
			return "", err
		}
		if ok && doc.ID != "" {
			return doc.ID, nil
		}
		if err := d.createID(); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("state dir %s: cannot create %s", d.path, idFile)
}

// PeekID returns the state directory's identity if it has one yet, without
// making one (for a dry run, which must change nothing).
func (d *Dir) PeekID() (string, bool, error) {
	var doc idDoc
	ok, err := d.Read(idFile, &doc)
	return doc.ID, ok && doc.ID != "", err
}

// createID writes a new identity without a lock: the file is made whole
// beside its place and hard-linked into it, which fails if another process
// won the race (its identity then stands).
func (d *Dir) createID() error {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return err
	}
	doc := idDoc{Header: Header{Version: Version}, ID: hex.EncodeToString(b)}
	data, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(d.path, "."+idFile+".tmp-id-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Link(tmp.Name(), filepath.Join(d.path, idFile)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return syncDir(d.path)
}
