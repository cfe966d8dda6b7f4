package record

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"reflect"
	"slices"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// DecodedFile caches what mesh files decoded to. An entry names the applied
// modules that one file's bytes decode to. An apply of the same bytes then
// takes those modules from applied.json and skips the YAML decode.
const DecodedFile = "decoded.json"

// maxDecodedSize bounds the cache file. A larger one is ignored.
const maxDecodedSize = 64 << 10

// maxDecodedEntries is how many files' decodes the cache keeps.
const maxDecodedEntries = 16

// Decoded is the decoded.json document.
type Decoded struct {
	state.Header
	Entries []DecodedEntry `json:"entries"`
}

// DecodedEntry is one mesh file's decode. Its modules are those of the
// applied.json whose SHA-256 is Applied.
type DecodedEntry struct {
	Key     string   `json:"key"` // DecodeInput.key
	Applied string   `json:"applied"`
	Modules []string `json:"modules"`
	// Ahead is the hash of the file's bytes (DecodeInput.aheadHash) when
	// an apply of them may take the state lock and ask for the engine's
	// list as it starts. Its modules pull nothing first and use no etcd.
	// It is "" otherwise.
	Ahead string `json:"ahead,omitempty"`
}

// DecodeInput is what a mesh file's decode depends on. That is its bytes
// and directory, and the meshctl build that decodes it. Build is empty when
// the build cannot be told, and then nothing is cached.
type DecodeInput struct {
	Src   *mesh.Source
	Build string
}

// Cached is a decode the cache gave. File holds the modules of Applied, a
// snapshot of applied.json whose SHA-256 is Sum. An apply must find that
// same applied.json under the state lock. Else the decode is stale.
type Cached struct {
	File    *mesh.File
	Applied *Applied
	Sum     string
}

// LookupDecoded returns the cached decode of in, if the cache has one. Any
// fault of the cache is a miss. A cache file may be corrupt, too large, of
// another owner, or of another build. A referenced file may have changed.
func LookupDecoded(d *state.Dir, in DecodeInput) (*Cached, bool) {
	if in.Src == nil || in.Src.Dir == "" || in.Build == "" {
		return nil, false
	}
	var doc Decoded
	if _, ok, err := d.ReadSum(DecodedFile, &doc, maxDecodedSize); err != nil || !ok || len(doc.Entries) == 0 {
		return nil, false
	}
	var a Applied
	sum, ok, err := d.ReadSum(AppliedFile, &a, state.MaxFileSize)
	if err != nil || !ok || a.File == nil {
		return nil, false
	}
	for _, e := range doc.Entries {
		if e.Applied != sum {
			continue
		}
		f, ok := a.modules(e.Modules)
		if !ok {
			continue
		}
		key, err := PeekSecretKey(d, f)
		if err != nil {
			return nil, false
		}
		if k, err := in.key(f, key); err == nil && hmac.Equal([]byte(k), []byte(e.Key)) {
			return &Cached{File: f, Applied: &a, Sum: sum}, true
		}
	}
	return nil, false
}

// ListsAhead reports whether the last apply of in's bytes recorded that an
// apply of them may take its lock and list ahead (DecodedEntry.Ahead). It
// reads decoded.json only. A wrong guess costs the apply one engine
// request: its list ahead is dropped.
func ListsAhead(d *state.Dir, in DecodeInput) bool {
	if in.Src == nil || in.Src.Dir == "" || in.Build == "" {
		return false
	}
	var doc Decoded
	if _, ok, err := d.ReadSum(DecodedFile, &doc, maxDecodedSize); err != nil || !ok {
		return false
	}
	h := in.aheadHash()
	return slices.ContainsFunc(doc.Entries, func(e DecodedEntry) bool { return e.Ahead == h })
}

// modules returns the file of a's modules names. It reports false when one
// is missing, or names is empty.
func (a *Applied) modules(names []string) (*mesh.File, bool) {
	f := &mesh.File{Modules: map[string]*mesh.Module{}}
	for _, n := range names {
		m := a.File.Modules[n]
		if m == nil {
			return nil, false
		}
		f.Modules[n] = m
	}
	return f, len(names) > 0
}

// WriteDecoded records that in decodes to f, the file an apply just
// recorded. The caller holds the state lock. key is the host's secret key
// for a file with secrets or configs (SecretKey). ahead says an apply of
// the same bytes may list ahead (DecodedEntry.Ahead). Nothing is recorded when
// applied.json does not hold f's modules exactly as decoded. Entries of
// another applied.json are dropped, since they can no longer hit. So is an
// entry of the same modules, which the new one replaces.
func WriteDecoded(lock *state.Lock, in DecodeInput, f *mesh.File, key []byte, ahead bool) error {
	if in.Src == nil || in.Src.Dir == "" || in.Build == "" || len(f.Modules) == 0 {
		return nil
	}
	var a Applied
	sum, ok, err := lock.Dir().ReadSum(AppliedFile, &a, state.MaxFileSize)
	if err != nil || !ok || a.File == nil {
		return err
	}
	names := f.ModuleNames()
	for _, n := range names {
		// The applied modules stand for the decode on a hit. A module that
		// JSON does not carry whole must be decoded each time.
		if !reflect.DeepEqual(a.File.Modules[n], f.Modules[n]) {
			return fmt.Errorf("module %s does not read back from %s as decoded", n, AppliedFile)
		}
	}
	k, err := in.key(f, key)
	if err != nil {
		return err
	}
	var doc Decoded
	if _, _, err := lock.Dir().ReadSum(DecodedFile, &doc, maxDecodedSize); err != nil {
		doc = Decoded{} // a cache that cannot be read is replaced
	}
	entries := []DecodedEntry{{Key: k, Applied: sum, Modules: names}}
	if ahead {
		entries[0].Ahead = in.aheadHash()
	}
	for _, e := range doc.Entries {
		// An entry of the same modules is most likely of the file's
		// earlier bytes, or of another build.
		if e.Applied == sum && e.Key != k && !slices.Equal(e.Modules, names) && len(entries) < maxDecodedEntries {
			entries = append(entries, e)
		}
	}
	if slices.EqualFunc(entries, doc.Entries, sameEntry) {
		return nil
	}
	return lock.Write(DecodedFile, &Decoded{Entries: entries})
}

func sameEntry(a, b DecodedEntry) bool {
	return a.Key == b.Key && a.Applied == b.Applied && slices.Equal(a.Modules, b.Modules) && a.Ahead == b.Ahead
}

// aheadHash is the SHA-256 of in's build, directory and bytes. It reads no
// referenced file, so it holds no secret: a mesh file's bytes are none.
func (in DecodeInput) aheadHash() string {
	h := sha256.New()
	hashFields(h, []byte("meshctl ahead v1"), []byte(in.Build), []byte(in.Src.Dir), in.Src.Data)
	return hex.EncodeToString(h.Sum(nil))
}

// hashFields writes each field into h with its length before it, so that
// no two lists of fields hash the same bytes.
func hashFields(h hash.Hash, fields ...[]byte) {
	for _, b := range fields {
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
}

// key is the cache key of in, decoded as f. It hashes the build, the
// directory, the file's bytes and the content of every file f references.
// With secrets or configs, it is an HMAC with the host's secret key. So the
// cache holds nothing a guess at a secret can be checked against.
func (in DecodeInput) key(f *mesh.File, secretKey []byte) (string, error) {
	var h hash.Hash
	switch {
	case f.HasFileMounts() && len(secretKey) == 0:
		return "", errors.New("no secret key to hash the referenced files with")
	case f.HasFileMounts():
		h = hmac.New(sha256.New, secretKey)
	default:
		h = sha256.New()
	}
	hashFields(h, []byte("meshctl decoded v1"), []byte(in.Build), []byte(in.Src.Dir), in.Src.Data)
	for _, p := range f.ReferencedFiles() {
		data, err := mesh.ReadReferenced(p)
		if err != nil {
			return "", err
		}
		hashFields(h, []byte(p), data)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
