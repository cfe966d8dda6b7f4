package record

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestDesiredEachSecretOfOneModule: a module whose secret file cannot be
// read is left out, saying why; the other modules' containers are
// resolved, their secrets hashed with the key given (a command's work on
// one module never depends on another module's files).
func TestDesiredEachSecretOfOneModule(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pw.txt"), []byte("pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "mesh.yaml")
	if err := os.WriteFile(file, []byte(`modules:
  web:
    containers:
      app: {image: x, secrets: [{name: pw, file: pw.txt}]}
  store:
    containers:
      db: {image: x, secrets: [{name: pw, file: gone.txt}]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := mesh.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &Applied{File: f}
	desired, errs := a.DesiredEach([]byte("key-0123456789abcdef"))
	if len(desired) != 1 || desired[0].Name != "web.app" || !strings.HasPrefix(desired[0].Spec.Secrets["pw"].Hash, "hmac-sha256:") {
		t.Errorf("desired = %+v", desired)
	}
	var se *mesh.SecretFileError
	if len(errs) != 1 || !errors.As(errs["store"], &se) || se.Path != filepath.Join(dir, "gone.txt") {
		t.Errorf("errs = %v, want store's missing gone.txt", errs)
	}
}

// TestSecretKeyOnlyForSecrets: a file without secrets or configs needs no
// key, and none is made; one with them gets the directory's, made by
// SecretKey only; PeekSecretKey, without a key, gives one of the run's own.
func TestSecretKeyOnlyForSecrets(t *testing.T) {
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	plain := &mesh.File{Modules: map[string]*mesh.Module{"m": {Containers: map[string]*mesh.Container{"c": {Image: "x"}}}}}
	withSecret := &mesh.File{Modules: map[string]*mesh.Module{"m": {Containers: map[string]*mesh.Container{"c": {Image: "x",
		ContainerFields: mesh.ContainerFields{Secrets: []mesh.FileMount{{File: "/pw"}}}}}}}}
	if key, err := SecretKey(d, plain); key != nil || err != nil {
		t.Errorf("a file without secrets: key %x, %v", key, err)
	}
	if _, ok, _ := d.PeekSecretKey(); ok {
		t.Fatalf("a key was made for a file without secrets")
	}
	k1, err := PeekSecretKey(d, withSecret)
	if err != nil || len(k1) != 32 {
		t.Fatalf("peek without a key: %x, %v", k1, err)
	}
	if _, ok, _ := d.PeekSecretKey(); ok {
		t.Fatalf("a key was made by PeekSecretKey")
	}
	k2, err := SecretKey(d, withSecret)
	if err != nil || len(k2) != 32 || string(k1) == string(k2) {
		t.Fatalf("create: %x, %v", k2, err)
	}
	if k3, err := PeekSecretKey(d, withSecret); err != nil || string(k3) != string(k2) {
		t.Errorf("peek after create: %x, %v; want the key made", k3, err)
	}
}
