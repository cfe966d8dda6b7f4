package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// loadMesh reads and decodes the mesh file at path, or stdin for "-". It
// does so interruptibly, since its input may never end and its decode may
// take long.
func loadMesh(ctx context.Context, path string, stdin io.Reader) (*mesh.File, error) {
	src, err := readMesh(ctx, path, stdin)
	if err != nil {
		return nil, err
	}
	return decodeMesh(ctx, src)
}

// readMesh reads the mesh file at path, or stdin for "-", interruptibly.
func readMesh(ctx context.Context, path string, stdin io.Reader) (*mesh.Source, error) {
	return interruptible(ctx, "reading the mesh file "+meshName(path), func() (*mesh.Source, error) {
		return mesh.ReadSource(ctx, path, stdin)
	})
}

// decodeMesh decodes a mesh file read by readMesh, interruptibly.
func decodeMesh(ctx context.Context, src *mesh.Source) (*mesh.File, error) {
	return interruptible(ctx, "reading the mesh file "+meshName(src.Name), src.Decode)
}

func meshName(path string) string {
	if path == "-" || path == "<stdin>" {
		return "stdin"
	}
	return path
}

// loadMeshCached is loadMesh through the state directory's decode cache
// (record.DecodedFile). cached is set when the file came from the cache.
// A state directory that cannot be read is a miss here. The apply then
// says what is wrong with it. ahead, if set, is called with the file's
// input before the lookup, when the cache says an apply of these bytes
// may take its lock and list ahead (record.ListsAhead). It is dropped on a
// miss: a decode is made without the lock.
func loadMeshCached(ctx context.Context, env *Env, path string, ahead func() *apply.Ahead) (*mesh.File, record.DecodeInput, *record.Cached, *apply.Ahead, error) {
	src, err := readMesh(ctx, path, env.Stdin)
	if err != nil {
		return nil, record.DecodeInput{}, nil, nil, err
	}
	in := record.DecodeInput{Src: src, Build: decodeBuild()}
	if d, err := env.StateReadOnly(); err == nil {
		var h *apply.Ahead
		if ahead != nil && record.ListsAhead(d, in) {
			h = ahead()
		}
		if c, ok := record.LookupDecoded(d, in); ok {
			env.Log.Debug("mesh file decode cached", "file", src.Name, "ahead", h != nil)
			return c.File, in, c, h, nil
		}
		h.Drop()
	}
	f, err := decodeMesh(ctx, src)
	return f, in, nil, nil, err
}

// decodeBuild names this meshctl build for the decode cache: its Go build
// information, and the executable's size and modification time. A rebuilt
// binary of the same commit differs in the latter. It is "" when the build
// cannot be told apart, and then nothing is cached.
func decodeBuild() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	fi, err := os.Stat(exe)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s\n%s\n%d %d", bi, exe, fi.Size(), fi.ModTime().UnixNano())
}
