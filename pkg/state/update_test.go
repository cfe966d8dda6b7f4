package state

import "context"

// update changes a single file, as apply and window do with Lock.Read and
// Lock.Write: it takes the lock, reads the file into doc (missing = doc's
// zero value), calls change, and writes doc back atomically if change
// returned nil. change runs under the lock, so what it decides from doc
// cannot be raced by another process.
func update(ctx context.Context, d *Dir, lock, name string, opts LockOptions, doc Document, change func() error) error {
	l, err := d.Lock(ctx, lock, opts)
	if err != nil {
		return err
	}
	defer l.Unlock()
	if _, err := l.Read(name, doc); err != nil {
		return err
	}
	if err := change(); err != nil {
		return err
	}
	return l.Write(name, doc)
}
