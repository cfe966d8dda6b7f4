package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// interruptible runs f, which cannot be cancelled (a read of a stdin or a
// FIFO that never ends, a decode of a large file), and returns what it
// returns, or ctx's error as soon as ctx is done: a signal then ends the
// command at once (exit 130) instead of waiting on f. f must change
// nothing that outlives the process: it is left running, and dies with it.
func interruptible[T any](ctx context.Context, what string, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("interrupted while %s: %w", what, ctx.Err())
	}
}

// loadMesh reads and decodes the mesh file at path ("-": stdin),
// interruptibly: its input may never end, its decode may take long.
func loadMesh(ctx context.Context, path string, stdin io.Reader) (*mesh.File, error) {
	name := path
	if path == "-" {
		name = "stdin"
	}
	return interruptible(ctx, "reading the mesh file "+name, func() (*mesh.File, error) {
		return mesh.Load(path, stdin)
	})
}
