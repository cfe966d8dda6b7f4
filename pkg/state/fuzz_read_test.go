package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/fault"
)

// fuzzDoc is a state document with a field of each kind meshctl's own
// documents use.
type fuzzDoc struct {
	Header
	Name  string            `json:"name"`
	Items []int             `json:"items"`
	Map   map[string]string `json:"map"`
	Sub   *struct {
		A bool `json:"a"`
	} `json:"sub"`
}

// FuzzRead feeds any bytes to Read, as a state file another process (or a
// disk, or an editor) left: it never panics, a file it refuses is a
// *FileError naming the file (exit 2), and one it accepts has a version
// this meshctl reads and survives a Write and Read again unchanged.
func FuzzRead(f *testing.F) {
	f.Add([]byte(`{"version":1,"name":"a","items":[1,2],"map":{"k":"v"},"sub":{"a":true}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`{"version":0}`))
	f.Add([]byte(`{"version":1,"nope":1}`))
	f.Add([]byte(`{"version":1}{"version":1}`))
	f.Add([]byte(`{"version":1,"version":2}`))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "state")
		d, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "doc.json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
		var doc fuzzDoc
		ok, err := d.Read("doc.json", &doc)
		if err != nil {
			var fe *FileError
			if !errors.As(err, &fe) || fe.Fault() != fault.BadInput {
				t.Fatalf("Read error is %T, want a *FileError (exit 2): %v", err, err)
			}
			if !strings.Contains(err.Error(), "doc.json") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if !ok {
			t.Fatal("Read of an existing file reported it missing")
		}
		if doc.Version < 1 || doc.Version > Version {
			t.Fatalf("accepted version %d", doc.Version)
		}
		lock, err := d.Lock(t.Context(), "fuzz", LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Unlock()
		if err := lock.Write("doc.json", &doc); err != nil {
			t.Fatalf("Write of what Read accepted: %v", err)
		}
		var again fuzzDoc
		if _, err := d.Read("doc.json", &again); err != nil {
			t.Fatalf("Read of what Write wrote: %v", err)
		}
		if again.Name != doc.Name || len(again.Items) != len(doc.Items) || len(again.Map) != len(doc.Map) {
			t.Fatalf("Write then Read changed %+v into %+v", doc, again)
		}
	})
}
