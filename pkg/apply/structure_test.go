package apply

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestOnlyCliImportsApply: apply is the command's entry point, not a
// library for the other domains: window, status and lifecycle
// import applied, lifecycle, holds and claims, and only cli (and the
// commands) import apply. Test files may.
func TestOnlyCliImportsApply(t *testing.T) {
	const apply = "github.com/meshctl/meshctl/pkg/apply"
	repo := filepath.Join("..", "..")
	fset := token.NewFileSet()
	n := 0
	for _, top := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(repo, top), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			n++
			rel, _ := filepath.Rel(repo, path)
			dir := filepath.ToSlash(filepath.Dir(rel))
			for _, imp := range f.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == apply && dir != "pkg/cli" && !strings.HasPrefix(dir, "cmd/") {
					t.Errorf("%s imports %s: only pkg/cli and the commands may", rel, apply)
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

// TestDomainFunctionsReadable holds apply, window, lifecycle, status and
// applied to readable functions: no function over 80 lines (apply
// under its lock reads as its phases, each a named step), no goroutine
// body over 20 (a goroutine calls a named function).
func TestDomainFunctionsReadable(t *testing.T) {
	const maxFunc, maxGoBody = 80, 20
	fset := token.NewFileSet()
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	n := 0
	for _, dir := range []string{"apply", "window", "lifecycle", "status", "applied"} {
		files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			n++
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && lines(fd) > maxFunc {
					t.Errorf("%s: func %s is %d lines: split it into named steps (at most %d)", fset.Position(fd.Pos()), fd.Name.Name, lines(fd), maxFunc)
				}
			}
			ast.Inspect(f, func(node ast.Node) bool {
				g, ok := node.(*ast.GoStmt)
				if !ok {
					return true
				}
				if lit, ok := g.Call.Fun.(*ast.FuncLit); ok && lines(lit.Body)-2 > maxGoBody {
					t.Errorf("%s: a goroutine body of %d lines: call a named function (at most %d)", fset.Position(g.Pos()), lines(lit.Body)-2, maxGoBody)
				}
				return true
			})
		}
	}
	if n < 20 {
		t.Fatalf("read only %d Go files: wrong directory?", n)
	}
}
