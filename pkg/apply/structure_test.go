package apply

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// domainPackages are the packages under pkg/ that carry meshctl's rules.
// Each is held to TestDomainFunctionsReadable.
var domainPackages = []string{"apply", "coord", "window", "lifecycle", "status", "record"}

// goFile is one parsed non-test Go file of the repository.
type goFile struct {
	rel string // path from the repository root, slashed
	dir string // its directory from the repository root
	f   *ast.File
}

// repoFiles parses every non-test Go file under pkg, cmd and internal.
func repoFiles(t *testing.T, fset *token.FileSet) []goFile {
	t.Helper()
	repo := filepath.Join("..", "..")
	var out []goFile
	for _, top := range []string{"pkg", "cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(repo, top), func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(repo, path)
			rel = filepath.ToSlash(rel)
			out = append(out, goFile{rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), f: f})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 50 {
		t.Fatalf("read only %d Go files: wrong directory?", len(out))
	}
	return out
}

// plant parses src as the file rel, for a test that plants a violation.
func plant(t *testing.T, fset *token.FileSet, rel, src string) goFile {
	t.Helper()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	return goFile{rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)), f: f}
}

// applyImporters says which files import apply where they may not: apply
// is the command's entry point, not a library for the other domains.
func applyImporters(g goFile) []string {
	const apply = "github.com/meshctl/meshctl/pkg/apply"
	var out []string
	for _, imp := range g.f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == apply && g.dir != "pkg/cli" && !strings.HasPrefix(g.dir, "cmd/") {
			out = append(out, g.rel+" imports "+apply+": only pkg/cli and the commands may")
		}
	}
	return out
}

// TestOnlyCliImportsApply: window, status, coord, lifecycle and record are
// the domains apply uses. Only cli (and the commands) import apply. Test
// files may.
func TestOnlyCliImportsApply(t *testing.T) {
	fset := token.NewFileSet()
	for _, g := range repoFiles(t, fset) {
		for _, v := range applyImporters(g) {
			t.Error(v)
		}
	}
	planted := plant(t, fset, "pkg/window/planted.go", `package window
import _ "github.com/meshctl/meshctl/pkg/apply"`)
	if len(applyImporters(planted)) == 0 {
		t.Error("a window file that imports apply goes unseen")
	}
}

// unreadable says which functions of g are too long to read: a function
// over 80 lines, or a goroutine body over 20 (a goroutine calls a named
// function).
func unreadable(fset *token.FileSet, g goFile) []string {
	const maxFunc, maxGoBody = 80, 20
	lines := func(n ast.Node) int { return fset.Position(n.End()).Line - fset.Position(n.Pos()).Line + 1 }
	var out []string
	for _, d := range g.f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil && lines(fd) > maxFunc {
			out = append(out, fset.Position(fd.Pos()).String()+": func "+fd.Name.Name+" is "+strconv.Itoa(lines(fd))+
				" lines: split it into named steps (at most 80)")
		}
	}
	ast.Inspect(g.f, func(node ast.Node) bool {
		s, ok := node.(*ast.GoStmt)
		if !ok {
			return true
		}
		if lit, ok := s.Call.Fun.(*ast.FuncLit); ok && lines(lit.Body)-2 > maxGoBody {
			out = append(out, fset.Position(s.Pos()).String()+": a goroutine body of "+strconv.Itoa(lines(lit.Body)-2)+
				" lines: call a named function (at most 20)")
		}
		return true
	})
	return out
}

// TestDomainFunctionsReadable holds every domain package to what issue 16
// made of apply. Apply under its lock reads as its phases, each a named
// step.
func TestDomainFunctionsReadable(t *testing.T) {
	fset := token.NewFileSet()
	seen := map[string]int{}
	for _, g := range repoFiles(t, fset) {
		pkg, ok := strings.CutPrefix(g.dir, "pkg/")
		if !ok || !slices.Contains(domainPackages, pkg) {
			continue
		}
		seen[pkg]++
		for _, v := range unreadable(fset, g) {
			t.Error(v)
		}
	}
	for _, p := range domainPackages {
		if seen[p] == 0 {
			t.Errorf("domain package %s has no Go file: a renamed package?", p)
		}
	}
	long := "package coord\nfunc f() {\n" + strings.Repeat("\t_ = 1\n", 80) + "}\n"
	goBody := "package coord\nfunc f() {\n\tgo func() {\n" + strings.Repeat("\t\t_ = 1\n", 21) + "\t}()\n}\n"
	for name, src := range map[string]string{"a long func": long, "a long goroutine body": goBody} {
		if len(unreadable(fset, plant(t, fset, "pkg/coord/planted.go", src))) == 0 {
			t.Errorf("%s goes unseen", name)
		}
	}
}

// protocolFiles are the files of the window protocol. Only pkg/coord
// names them.
var protocolFiles = []string{"holds.json", "claims.json", "windows-history.json"}

// protocolTouches says where g, outside pkg/coord, reads or writes a
// protocol file itself or declares a document of one. Such a file
// belongs to coord.
func protocolTouches(g goFile) []string {
	if g.dir == "pkg/coord" {
		return nil
	}
	var out []string
	for _, imp := range g.f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); strings.HasSuffix(p, "/pkg/holds") || strings.HasSuffix(p, "/pkg/claims") {
			out = append(out, g.rel+" imports "+p+": the holds and claims live in pkg/coord")
		}
	}
	ast.Inspect(g.f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			for _, name := range protocolFiles {
				if n.Kind == token.STRING && strings.Contains(n.Value, name) {
					out = append(out, g.rel+" names "+name+": only pkg/coord reads and writes it")
				}
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && x.Name == "coord" && strings.HasSuffix(n.Sel.Name, "File") {
				out = append(out, g.rel+" uses coord."+n.Sel.Name+": read and write it through coord's API")
			}
		case *ast.StructType:
			// A state file's document embeds state.Header: state.Document
			// asks for it. A report's "holds" key, as a dry run's, is none.
			if !embedsHeader(n) {
				return true
			}
			for _, f := range n.Fields.List {
				tag := ""
				if f.Tag != nil {
					tag, _ = strconv.Unquote(f.Tag.Value)
				}
				if j := reflect.StructTag(tag).Get("json"); j == "holds" || j == "claims" {
					out = append(out, g.rel+" declares a "+j+" document: only pkg/coord may")
				}
			}
		}
		return true
	})
	return out
}

// embedsHeader says whether st embeds state.Header, as every document of a
// state file does.
func embedsHeader(st *ast.StructType) bool {
	for _, f := range st.Fields.List {
		if sel, ok := f.Type.(*ast.SelectorExpr); ok && len(f.Names) == 0 && sel.Sel.Name == "Header" {
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "state" {
				return true
			}
		}
	}
	return false
}

// TestOnlyCoordTouchesProtocolFiles: holds.json, claims.json and the
// window history are pkg/coord's alone. Every other package reads holds
// through its API (Observe, ClassifySnapshot, ReadHolds), never the file.
func TestOnlyCoordTouchesProtocolFiles(t *testing.T) {
	fset := token.NewFileSet()
	for _, g := range repoFiles(t, fset) {
		for _, v := range protocolTouches(g) {
			t.Error(v)
		}
	}
	for name, src := range map[string]string{
		"a literal file name": `package status; const f = "holds.json"`,
		"a coord file name":   `package status; import "github.com/meshctl/meshctl/pkg/coord"; var f = coord.ClaimsFile`,
		"a holds document":    `package status; import "github.com/meshctl/meshctl/pkg/state"; type doc struct { state.Header; Holds []int ` + "`json:\"holds\"`" + ` }`,
	} {
		if len(protocolTouches(plant(t, fset, "pkg/status/planted.go", src))) == 0 {
			t.Errorf("%s outside pkg/coord goes unseen", name)
		}
	}
	if v := protocolTouches(plant(t, fset, "pkg/window/planted.go", `package window; type report struct { Holds []int `+"`json:\"holds\"`"+` }`)); len(v) != 0 {
		t.Errorf("a report with a holds key, not a state file's document, is refused: %v", v)
	}
	if len(protocolTouches(plant(t, fset, "pkg/coord/planted.go", `package coord; const f = "holds.json"`))) != 0 {
		t.Error("pkg/coord itself is refused its own file")
	}
}
