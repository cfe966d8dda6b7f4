package cli

import (
	"context"
	"io"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// loadMesh reads and decodes the mesh file at path, or stdin for "-". It
// does so interruptibly, since its input may never end and its decode may
// take long.
func loadMesh(ctx context.Context, path string, stdin io.Reader) (*mesh.File, error) {
	name := path
	if path == "-" {
		name = "stdin"
	}
	return interruptible(ctx, "reading the mesh file "+name, func() (*mesh.File, error) {
		return mesh.LoadContext(ctx, path, stdin)
	})
}
