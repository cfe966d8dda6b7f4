package state

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
)

// secretKeyFile holds the key that the hashes of secret and config files
// are made with (HMAC-SHA256).
const secretKeyFile = "secret-key.json"

type secretKeyDoc struct {
	Header
	Key string `json:"key"` // 32 random bytes, hex
}

// SecretKey returns the host's key for hashing the contents of secret and
// config files. It is made once at random, 32 bytes with mode 0600, under the
// lock "id". A recorded spec carries such a hash, on a container label.
// Anyone who can reach the engine reads that label. With a key, a short
// password cannot be found by hashing guesses, as a plain sha256 of it could.
func (d *Dir) SecretKey() ([]byte, error) {
	if key, ok, err := d.PeekSecretKey(); err != nil || ok {
		return key, err
	}
	if d.readOnly {
		return nil, fmt.Errorf("state dir %s has no secret key yet, and was opened read-only", d.path)
	}
	l, err := d.Lock(context.Background(), idLock, LockOptions{Timeout: idLockWait, What: "state dir identity lock"})
	if err != nil {
		return nil, err
	}
	defer l.Unlock()
	// Re-check under the lock, since another process may have made it
	// meanwhile.
	if key, ok, err := d.PeekSecretKey(); err != nil || ok {
		return key, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	if err := l.Write(secretKeyFile, &secretKeyDoc{Key: hex.EncodeToString(key)}); err != nil {
		return nil, err
	}
	return key, nil
}

// PeekSecretKey returns the host's secret key if it has one yet. It never
// makes one, for a dry run and status change nothing. A key file that another
// user can read is refused. Whoever holds the key can test guesses against
// the hashes on the labels.
func (d *Dir) PeekSecretKey() ([]byte, bool, error) {
	var doc secretKeyDoc
	ok, err := d.Read(secretKeyFile, &doc)
	if err != nil || !ok {
		return nil, false, err
	}
	p, err := d.join(secretKeyFile)
	if err != nil {
		return nil, false, err
	}
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, false, unreadable(p, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, false, &FileError{Path: p, Err: fmt.Errorf("is readable by other users (mode %04o); it keys the hashes of secret files on the container labels: chmod 600 it", perm)}
	}
	key, err := hex.DecodeString(doc.Key)
	if err != nil || len(key) < 16 {
		return nil, false, &FileError{Path: p, Err: fmt.Errorf("holds no valid key; move it aside (containers with secrets are recreated at the next apply)")}
	}
	return key, true, nil
}
