package record

import (
	"crypto/rand"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// SecretKey returns the key that f's secret and config files are hashed with.
// It is the state directory's key, made by the first apply of a file with
// secrets. SecretKey returns nil when f has none.
func SecretKey(d *state.Dir, f *mesh.File) ([]byte, error) {
	if f == nil || !f.HasFileMounts() {
		return nil, nil
	}
	return d.SecretKey()
}

// PeekSecretKey is SecretKey for a command that writes no key. A dry run,
// status and a window are such commands. A directory without a key gets a key
// of this run's own. No container can have been created with a hash of the
// missing one. So every container with a secret differs from the file either
// way.
func PeekSecretKey(d *state.Dir, f *mesh.File) ([]byte, error) {
	if f == nil || !f.HasFileMounts() {
		return nil, nil
	}
	key, ok, err := d.PeekSecretKey()
	if err != nil || ok {
		return key, err
	}
	key = make([]byte, 32)
	_, err = rand.Read(key)
	return key, err
}
