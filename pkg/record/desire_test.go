package record

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// ledgerOf is a resolver of one module's build. It counts its calls.
type ledgerOf struct {
	module, image, build string
	calls                int
}

func (l *ledgerOf) resolve(module string) (string, string, bool, error) {
	l.calls++
	return l.image, l.build, module == l.module, nil
}

// loadMesh writes a mesh file and the files beside it, then loads it.
func loadMesh(t *testing.T, yaml string, files map[string]string) *mesh.File {
	t.Helper()
	dir := t.TempDir()
	files["mesh.yaml"] = yaml
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	f, err := mesh.Load(filepath.Join(dir, "mesh.yaml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const artifactMesh = `modules:
  web:
    containers:
      a: {artifact: app}
      b: {artifact: app}
      c: {image: x}
`

// TestDesireAgainReusesWhenNothingChanged: under the lock, the containers
// resolved before it are given back once. Each artifact module is resolved
// once more, not once per container. They equal what Desire gives.
func TestDesireAgainReusesWhenNothingChanged(t *testing.T) {
	f := loadMesh(t, artifactMesh, map[string]string{})
	l := &ledgerOf{module: "app", image: "app:1", build: "b1"}
	p, err := DesireOnce(f, l.resolve, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.calls = 0
	got, err := p.Again(f, l.resolve, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || &got[0] != &p.Desired[0] {
		t.Fatalf("Again gave %d containers, not those resolved before the lock", len(got))
	}
	if l.calls != 1 {
		t.Errorf("Again asked the ledger %d times, want once for module app", l.calls)
	}
	want, err := Desire(f, l.resolve, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Again = %+v, want Desire's %+v", got, want)
	}
	// Given away once: the caller may change them.
	again, err := p.Again(f, l.resolve, nil)
	if err != nil || len(again) != 3 || &again[0] == &got[0] {
		t.Errorf("a second Again reused the containers already given (err %v)", err)
	}
}

// TestDesireAgainResolvesAnew: whatever Desire reads that changed makes
// Again resolve afresh. That is a new build recorded meanwhile, another key,
// another file, or an env-file (read each time). A module without a build
// now fails as Desire fails, naming its first container.
func TestDesireAgainResolvesAnew(t *testing.T) {
	t.Run("new build", func(t *testing.T) {
		f := loadMesh(t, artifactMesh, map[string]string{})
		l := &ledgerOf{module: "app", image: "app:1", build: "b1"}
		p, err := DesireOnce(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.image, l.build = "app:2", "b2"
		got, err := p.Again(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got[0].Image != "app:2" || got[1].Build != "b2" || got[0].Spec.Image != "app:2" {
			t.Errorf("Again after build b2: %s %s %s, want app:2 of b2", got[0].Image, got[1].Build, got[0].Spec.Image)
		}
	})
	t.Run("no build", func(t *testing.T) {
		f := loadMesh(t, artifactMesh, map[string]string{})
		l := &ledgerOf{module: "app", image: "app:1", build: "b1"}
		p, err := DesireOnce(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		l.module = "none"
		_, err = p.Again(f, l.resolve, nil)
		_, want := Desire(f, l.resolve, nil, nil)
		var fe *fault.Error
		if !errors.As(err, &fe) || fe.Kind != fault.BadInput || err.Error() != want.Error() || !strings.Contains(err.Error(), "web.a") {
			t.Errorf("Again without a build: %v, want Desire's %v", err, want)
		}
	})
	t.Run("ledger error", func(t *testing.T) {
		f := loadMesh(t, artifactMesh, map[string]string{})
		l := &ledgerOf{module: "app", image: "app:1", build: "b1"}
		p, err := DesireOnce(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		gone := errors.New("etcd gone")
		_, err = p.Again(f, func(string) (string, string, bool, error) { return "", "", false, gone }, nil)
		if !errors.Is(err, gone) {
			t.Errorf("Again with the ledger gone: %v, want %v", err, gone)
		}
	})
	t.Run("other key or file", func(t *testing.T) {
		f := loadMesh(t, artifactMesh, map[string]string{})
		l := &ledgerOf{module: "app", image: "app:1", build: "b1"}
		p, err := DesireOnce(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.Again(f, l.resolve, []byte("another key"))
		if err != nil || &got[0] == &p.Desired[0] {
			t.Errorf("Again with another key reused the containers (err %v)", err)
		}
		p, err = DesireOnce(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		g := loadMesh(t, artifactMesh, map[string]string{})
		got, err = p.Again(g, l.resolve, nil)
		if err != nil || &got[0] == &p.Desired[0] {
			t.Errorf("Again of another file reused the containers (err %v)", err)
		}
	})
	t.Run("env-file", func(t *testing.T) {
		f := loadMesh(t, "modules:\n  web:\n    containers:\n      a: {image: x, env-file: [a.env]}\n",
			map[string]string{"a.env": "K=1\n"})
		l := &ledgerOf{}
		p, err := DesireOnce(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		path := f.Modules["web"].Containers["a"].EnvFile[0]
		if err := os.WriteFile(path, []byte("K=2\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := p.Again(f, l.resolve, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v := got[0].Def.Env["K"]; v != "2" {
			t.Errorf("Again after the env-file changed: K=%q, want 2 as read now", v)
		}
	})
}
