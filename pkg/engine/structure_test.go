package engine

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyEngineImportsDocker holds the Docker module to this package.
// The module is frozen upstream: moving to another client must stay a
// change of one package.
func TestOnlyEngineImportsDocker(t *testing.T) {
	const docker = "github.com/docker/docker"
	repo := filepath.Join("..", "..")
	fset := token.NewFileSet()
	n := 0
	for _, top := range []string{"pkg", "cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(repo, top), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			n++
			rel, _ := filepath.Rel(repo, path)
			if filepath.ToSlash(filepath.Dir(rel)) == "pkg/engine" {
				return nil
			}
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == docker || strings.HasPrefix(p, docker+"/") {
					t.Errorf("%s imports %s: only pkg/engine may", rel, p)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if n < 50 {
		t.Fatalf("read only %d Go files: wrong directory?", n)
	}
}
