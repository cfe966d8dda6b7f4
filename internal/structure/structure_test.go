package structure

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/meshctl/meshctl"

// listed is what go list -json says of one package.
type listed struct {
	ImportPath string
	Name       string
	Imports    []string // the imports of its non-test files
}

// testOnly returns the packages under prefix that no command reaches.
// A command is a main package under cmd/. Only non-test imports count,
// so a package that tests alone import is in the result.
func testOnly(pkgs []listed, prefix string) []string {
	imports := map[string][]string{}
	var todo []string
	for _, p := range pkgs {
		imports[p.ImportPath] = p.Imports
		if p.Name == "main" && strings.HasPrefix(p.ImportPath, module+"/cmd/") {
			todo = append(todo, p.ImportPath)
		}
	}
	reached := map[string]bool{}
	for len(todo) > 0 {
		p := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if reached[p] {
			continue
		}
		reached[p] = true
		todo = append(todo, imports[p]...)
	}
	var out []string
	for _, p := range pkgs {
		if strings.HasPrefix(p.ImportPath, prefix) && !reached[p.ImportPath] {
			out = append(out, p.ImportPath)
		}
	}
	slices.Sort(out)
	return out
}

// TestNoPackageOnlyForTests: every package under pkg/ is part of a command.
// Code that only tests import (a fake engine, a fault proxy) belongs
// under internal/. There it cannot pass for part of the product.
func TestNoPackageOnlyForTests(t *testing.T) {
	pkgs := goList(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found only %d packages: wrong directory?", len(pkgs))
	}
	for _, p := range testOnly(pkgs, module+"/pkg/") {
		t.Errorf("%s is imported by tests only: move it under internal/", p)
	}
}

// TestTestOnlyFindsAPlantedPackage: testOnly on a made-up import graph.
// It must name a package only tests import, directly or through another.
func TestTestOnlyFindsAPlantedPackage(t *testing.T) {
	pkg := func(path string, imports ...string) listed {
		name := filepath.Base(path)
		if strings.HasPrefix(path, "cmd/") {
			name = "main"
		}
		for i, imp := range imports {
			imports[i] = module + "/" + imp
		}
		return listed{ImportPath: module + "/" + path, Name: name, Imports: imports}
	}
	for _, tt := range []struct {
		name string
		pkgs []listed
		want []string
	}{
		{"all reached", []listed{pkg("cmd/meshctl", "pkg/cli"), pkg("pkg/cli", "pkg/engine"), pkg("pkg/engine")}, nil},
		{"a fake engine in pkg", []listed{pkg("cmd/meshctl", "pkg/cli"), pkg("pkg/cli"), pkg("pkg/engine/enginetest")},
			[]string{module + "/pkg/engine/enginetest"}},
		{"reached only through test support", []listed{pkg("cmd/meshctl", "pkg/cli"), pkg("pkg/cli"),
			pkg("internal/harness", "pkg/faultproxy"), pkg("pkg/faultproxy", "pkg/wire"), pkg("pkg/wire")},
			[]string{module + "/pkg/faultproxy", module + "/pkg/wire"}},
		{"a main outside cmd is no command", []listed{pkg("cmd/meshctl"), {ImportPath: module + "/scripts/gen", Name: "main",
			Imports: []string{module + "/pkg/gen"}}, pkg("pkg/gen")}, []string{module + "/pkg/gen"}},
		{"internal is not checked", []listed{pkg("cmd/meshctl"), pkg("internal/enginetest")}, nil},
	} {
		if got := testOnly(tt.pkgs, module+"/pkg/"); !slices.Equal(got, tt.want) {
			t.Errorf("%s: testOnly = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// goList lists the module's packages with go list -json.
func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Name,Imports", module+"/...")
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}
