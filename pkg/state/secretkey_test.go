package state

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretKey: the key is made once, 32 random bytes, in a 0600 file;
// Peek and a read-only directory never make it; two directories have two
// keys; a key file another user can read is refused, naming it.
func TestSecretKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	ro, err := Peek(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := ro.PeekSecretKey(); ok || err != nil {
		t.Fatalf("PeekSecretKey of a missing dir: %v %v", ok, err)
	}
	if _, err := ro.SecretKey(); err == nil {
		t.Errorf("a read-only dir made a key")
	}
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := d.PeekSecretKey(); ok {
		t.Fatalf("a key before SecretKey")
	}
	if _, err := os.Stat(filepath.Join(path, secretKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("PeekSecretKey made the file: %v", err)
	}
	key, err := d.SecretKey()
	if err != nil || len(key) != 32 {
		t.Fatalf("SecretKey = %x, %v", key, err)
	}
	again, err := d.SecretKey()
	if err != nil || !bytes.Equal(again, key) {
		t.Errorf("a second SecretKey = %x, %v; want the first", again, err)
	}
	fi, err := os.Stat(filepath.Join(path, secretKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v %v, want mode 0600", fi.Mode(), err)
	}
	other, err := Open(filepath.Join(t.TempDir(), "other"))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := other.SecretKey(); err != nil || bytes.Equal(k, key) {
		t.Errorf("two directories share a key: %v", err)
	}
	if err := os.Chmod(filepath.Join(path, secretKeyFile), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = d.SecretKey()
	var fe *FileError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "is readable by other users (mode 0644)") || !strings.Contains(err.Error(), "chmod 600 it") {
		t.Errorf("a world-readable key: %v", err)
	}
}
