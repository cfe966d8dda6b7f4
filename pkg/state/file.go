package state

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/meshctl/meshctl/pkg/fault"
)

// Header is embedded first in every state document. It carries the document's
// version, which Write sets and Read checks.
type Header struct {
	Version int `json:"version"`
}

func (h *Header) header() *Header { return h }

// Document is a state file's contents, a struct that embeds Header.
type Document interface{ header() *Header }

// Versioned is a Document whose format moved past Version. Write records
// its FormatVersion, and Read accepts that version and any older one. An
// older meshctl then says to upgrade, rather than meet an unknown field.
type Versioned interface {
	Document
	FormatVersion() int
}

// versionOf is the version Write records for doc, the newest Read accepts.
func versionOf(doc Document) int {
	if v, ok := doc.(Versioned); ok {
		return v.FormatVersion()
	}
	return Version
}

// VersionOnly is a Document read to learn whether it may be replaced. Read
// checks that the file parses as JSON and that this meshctl reads its
// version. It decodes nothing else.
type VersionOnly struct{ Header }

// MaxFileSize bounds what Read accepts. meshctl's own files stay far below.
const MaxFileSize = 64 << 20

// FileError reports a state file that cannot be used (exit 2). It may be
// unparsable, of a newer version, or a symlink. The file is left as it is.
type FileError struct {
	Path string
	Err  error
}

func (e *FileError) Error() string {
	return fmt.Sprintf("state file %s %v", e.Path, e.Err)
}

func (e *FileError) Unwrap() error { return e.Err }

// Fault says an unusable state file is bad input.
func (e *FileError) Fault() fault.Kind { return fault.BadInput }

// Read reads the file name into doc without a lock. That is a snapshot,
// always whole because writers replace files by rename. A missing file leaves
// doc as it is, its zero value, and Read reports false. A file that cannot be
// read is a *FileError. It may be a symlink, or a directory or FIFO in the
// file's place. It may lack permission, or have a symlinked directory on its
// path.
func (d *Dir) Read(name string, doc Document) (bool, error) {
	_, ok, err := d.ReadSum(name, doc, MaxFileSize)
	return ok, err
}

// ReadSum is Read of a file of at most limit bytes. It also returns the
// SHA-256 of the bytes it decoded, in hex. A caller compares that sum with a
// later one (Sum) to learn whether the file changed meanwhile.
func (d *Dir) ReadSum(name string, doc Document, limit int64) (string, bool, error) {
	data, ok, err := d.readData(name, limit)
	if err != nil || !ok {
		return "", false, err
	}
	if err := decode(data.bytes, doc); err != nil {
		return "", false, &FileError{Path: data.path, Err: fmt.Errorf("cannot be read: %w; it was left as it is: fix it or move it aside", err)}
	}
	return sumOf(data.bytes), true, nil
}

// Sum returns the SHA-256 of the file name, in hex, without decoding it. A
// missing file reports false. It checks the file as Read does.
func (d *Dir) Sum(name string) (string, bool, error) {
	data, ok, err := d.readData(name, MaxFileSize)
	if err != nil || !ok {
		return "", false, err
	}
	return sumOf(data.bytes), true, nil
}

func sumOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// fileData is the content of a state file, and its path for errors.
type fileData struct {
	path  string
	bytes []byte
}

// readData reads the file name, of at most limit bytes, with Read's checks.
func (d *Dir) readData(name string, limit int64) (fileData, bool, error) {
	p, err := d.join(name)
	if err != nil {
		return fileData{}, false, err
	}
	if err := d.checkParents(p); err != nil {
		return fileData{}, false, err
	}
	// O_NONBLOCK keeps a FIFO in a file's place from blocking the open. It is
	// refused below, as not a regular file.
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return fileData{}, false, nil
	}
	if errors.Is(err, syscall.ELOOP) {
		return fileData{}, false, symlinkError(p)
	}
	if err != nil {
		return fileData{}, false, unreadable(p, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return fileData{}, false, unreadable(p, err)
	}
	if !fi.Mode().IsRegular() {
		return fileData{}, false, &FileError{Path: p, Err: fmt.Errorf("is not a regular file (%s); it was left as it is: move it aside", fi.Mode().Type())}
	}
	if err := trusted(p, fi); err != nil {
		return fileData{}, false, err
	}
	// Read into a buffer of the file's size. io.ReadAll would grow one by
	// doubling, and allocate twice the size of a large applied.json.
	buf := bytes.NewBuffer(make([]byte, 0, min(fi.Size(), limit)+bytes.MinRead))
	_, err = buf.ReadFrom(io.LimitReader(f, limit+1))
	data := buf.Bytes()
	if err != nil {
		return fileData{}, false, unreadable(p, err)
	}
	if int64(len(data)) > limit {
		return fileData{}, false, &FileError{Path: p, Err: fmt.Errorf("is larger than %s; it was left as it is", sizeText(limit))}
	}
	return fileData{path: p, bytes: data}, true, nil
}

// sizeText writes a size limit as "64 MiB", or in bytes when not whole MiB.
func sizeText(n int64) string {
	if n >= 1<<20 && n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

func unreadable(p string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return &FileError{Path: p, Err: fmt.Errorf("cannot be read: %w; it was left as it is: fix it or move it aside", err)}
}

// checkParents refuses a path inside the directory whose intermediate
// directories (ledger/ …) are unfit. They may be symlinks, not directories,
// or not trusted (untrusted). O_NOFOLLOW guards only the last component. A
// missing directory is fine, since the file is missing too.
func (d *Dir) checkParents(p string) error {
	rel, err := filepath.Rel(d.path, filepath.Dir(p))
	if err != nil || rel == "." {
		return err
	}
	cur := d.path
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, part)
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil
		case err != nil:
			return unreadable(cur, err)
		case fi.Mode()&os.ModeSymlink != 0:
			return symlinkError(cur)
		case !fi.IsDir():
			return &FileError{Path: cur, Err: errors.New("is not a directory; move it aside")}
		}
		if err := trusted(cur, fi); err != nil {
			return err
		}
	}
	return nil
}

// decode checks the version, then decodes strictly. An unknown field is an
// error. So a file written by a newer meshctl is never half-understood.
// A file that decodes strictly is decoded once. Only one that fails, or
// has no version, is probed for its version, to say why it fails.
func decode(data []byte, doc Document) error {
	if h, ok := doc.(*VersionOnly); ok {
		if v, ok := headerVersion(data); ok && v >= 1 && v <= Version {
			h.Version = v
			return nil
		}
	} else {
		if err := decodeStrict(data, doc); err == nil {
			if v := doc.header().Version; v >= 1 && v <= Version {
				return nil
			}
		}
	}
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	switch newest := versionOf(doc); {
	case v.Version == nil:
		return errors.New(`has no "version"`)
	case *v.Version > newest:
		return fmt.Errorf("has version %d, newer than this meshctl reads (%d): upgrade meshctl", *v.Version, newest)
	case *v.Version < 1:
		return fmt.Errorf("has unknown version %d", *v.Version)
	}
	if h, ok := doc.(*VersionOnly); ok {
		h.Version = *v.Version
		return nil
	}
	return decodeStrict(data, doc)
}

// headerVersion reads the version of a document as plainly written as
// meshctl writes one. It checks that data parses, in one pass. Then it
// finds the top-level "version" without decoding the rest. ok is false
// for anything else, which json.Unmarshal then reads. That is a document
// that is not an object, a key with an escape or a non-ASCII byte, or a
// version not a plain integer. Keys match in any case, and the last one
// counts, as for Unmarshal. So ok means Unmarshal would read that version,
// without an error.
func headerVersion(data []byte) (version int, ok bool) {
	if !json.Valid(data) {
		return 0, false
	}
	i := skipSpace(data, 0)
	if i == len(data) || data[i] != '{' {
		return 0, false
	}
	found := false
	depth, key := 0, false
	for ; i < len(data); i++ {
		switch data[i] {
		case '{', '[':
			depth++
			key = depth == 1
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		case '"':
			end := i + 1 + bytes.IndexByte(data[i+1:], '"')
			for data[end-1] == '\\' && escaped(data[i+1:end]) {
				end += 1 + bytes.IndexByte(data[end+1:], '"')
			}
			if key {
				name := data[i+1 : end]
				if bytes.IndexByte(name, '\\') >= 0 || !isASCII(name) {
					return 0, false
				}
				if bytes.EqualFold(name, []byte("version")) {
					found = true
					if version, ok = intAfterColon(data, end+1); !ok {
						return 0, false
					}
				}
				key = false
			}
			i = end
		}
	}
	return version, found
}

// escaped reports whether s ends in an odd run of backslashes. Then the
// quote after it is part of the string.
func escaped(s []byte) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func isASCII(s []byte) bool {
	for _, c := range s {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// intAfterColon reads the plain integer after a key's colon, at data[i:].
// A fraction or an exponent is not one.
func intAfterColon(data []byte, i int) (int, bool) {
	i = skipSpace(data, i)
	if i == len(data) || data[i] != ':' {
		return 0, false
	}
	start := skipSpace(data, i+1)
	end := start
	if end < len(data) && data[end] == '-' {
		end++
	}
	for end < len(data) && data[end] >= '0' && data[end] <= '9' {
		end++
	}
	if end < len(data) && (data[end] == '.' || data[end] == 'e' || data[end] == 'E') {
		return 0, false
	}
	v, err := strconv.Atoi(string(data[start:end]))
	return v, err == nil
}

// decodeStrict decodes data into doc. An unknown field, or data after the
// document, is an error.
func decodeStrict(data []byte, doc Document) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(doc); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("has data after its JSON document")
	}
	return nil
}

// Read reads the file name under the lock, as Dir.Read does.
func (l *Lock) Read(name string, doc Document) (bool, error) {
	return l.dir.Read(name, doc)
}

// Sum returns the SHA-256 of the file name under the lock, as Dir.Sum does.
func (l *Lock) Sum(name string) (string, bool, error) {
	return l.dir.Sum(name)
}

// Write replaces the file name with doc atomically. It writes and fsyncs a
// temp file beside it, renames that over it, and fsyncs the directory. Call
// it with the lock held. The caller's lock makes the read-change-write of a
// file safe against other meshctl processes.
func (l *Lock) Write(name string, doc Document) error {
	if l.f == nil {
		return errors.New("state: write without the lock held")
	}
	p, err := l.dir.join(name)
	if err != nil {
		return err
	}
	doc.header().Version = versionOf(doc)
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", p, err)
	}
	data = append(data, '\n')
	if err := l.dir.mkdirFor(p); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-"+l.name+"-")
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	tmpName := tmp.Name()
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	if l.dir.beforeRename != nil {
		l.dir.beforeRename(tmpName)
	}
	if err := refuseSymlink(p); err != nil {
		return err
	}
	if err := os.Rename(tmpName, p); err != nil {
		return fmt.Errorf("rename %s: %w", tmpName, err)
	}
	ok = true
	return l.dir.syncDir(dir)
}

// Remove deletes the file name under the lock. A missing file is fine.
func (l *Lock) Remove(name string) error {
	p, err := l.dir.join(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return l.dir.syncDir(filepath.Dir(p))
}

// List returns the names of the regular files in the subdirectory sub whose
// names end in suffix, sorted. Temp and lock files are skipped. A missing
// subdirectory is empty, and a symlinked one is refused.
func (d *Dir) List(sub, suffix string) ([]string, error) {
	p, err := d.join(sub)
	if err != nil {
		return nil, err
	}
	// The subdirectory itself is checked as a parent of what is in it.
	if err := d.checkParents(filepath.Join(p, "x")); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, unreadable(p, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), suffix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

func (d *Dir) mkdirFor(p string) error {
	dir := filepath.Dir(p)
	if dir == d.path {
		return nil
	}
	fi, err := os.Lstat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		// The new directory's entry is durable before files go into it.
		return d.syncDir(d.path)
	case err != nil:
		return err
	case fi.Mode()&os.ModeSymlink != 0:
		return symlinkError(dir)
	case !fi.IsDir():
		return &FileError{Path: dir, Err: errors.New("is not a directory")}
	}
	return trusted(dir, fi)
}

func refuseSymlink(p string) error {
	fi, err := os.Lstat(p)
	if err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return symlinkError(p)
	}
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// looseMarker marks the temp files of WriteLoose. RemoveLooseTemps finds
// them by it.
const looseMarker = ".tmp-loose-"

// WriteLoose replaces the file name with doc by a temp file and a rename,
// without a lock and without fsync. Readers still never see a torn file.
// A crash may lose the file or its last version, so it serves only files
// that are progress, such as a running window's live log. The caller is its
// only writer.
func (d *Dir) WriteLoose(name string, doc Document) error {
	if d.readOnly {
		return errors.New("state: write to a state directory opened read-only")
	}
	p, err := d.join(name)
	if err != nil {
		return err
	}
	doc.header().Version = versionOf(doc)
	data, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode %s: %w", p, err)
	}
	data = append(data, '\n')
	if err := d.mkdirFor(p); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+looseMarker)
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = refuseSymlink(p)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// RemoveLooseTemps removes the temp files WriteLoose left in the
// subdirectory sub, as a kill between its create and its rename does. It
// keeps those of the files keep names, whose writers may still run. Call
// it under the lock that orders those writers' starts and ends.
func (l *Lock) RemoveLooseTemps(sub string, keep func(name string) bool) error {
	p, err := l.dir.join(sub)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		target, _, ok := strings.Cut(strings.TrimPrefix(e.Name(), "."), looseMarker)
		if !ok || !strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() || keep(target) {
			continue
		}
		if err := os.Remove(filepath.Join(p, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
