package record

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// decodeFixture is a mesh file with an env-file, a secret and a config, in
// a directory of its own, and a state directory. Its decode is cached as an
// apply of it leaves it.
type decodeFixture struct {
	t     *testing.T
	d     *state.Dir
	dir   string
	data  []byte
	build string
	ahead bool // record says an apply of these bytes may list ahead
}

const fixtureMesh = `modules:
  web:
    containers:
      app:
        image: busybox:1
        env-file: [app.env]
        secrets: [{file: db.pw}]
        configs: [{file: app.conf}]
`

func newDecodeFixture(t *testing.T) *decodeFixture {
	t.Helper()
	fx := &decodeFixture{t: t, dir: t.TempDir(), data: []byte(fixtureMesh), build: "build-1"}
	for name, content := range map[string]string{"app.env": "A=1\n", "db.pw": "hunter2", "app.conf": "x=1"} {
		fx.write(name, content)
	}
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	fx.d = d
	fx.record()
	return fx
}

func (fx *decodeFixture) write(name, content string) {
	fx.t.Helper()
	if err := os.WriteFile(filepath.Join(fx.dir, name), []byte(content), 0o600); err != nil {
		fx.t.Fatal(err)
	}
}

func (fx *decodeFixture) input() DecodeInput {
	return DecodeInput{Src: &mesh.Source{Name: "mesh.yaml", Data: fx.data, Dir: fx.dir}, Build: fx.build}
}

// record decodes the file, writes applied.json as an apply would, and
// caches the decode.
func (fx *decodeFixture) record() {
	t := fx.t
	t.Helper()
	f, err := fx.input().Src.Decode()
	if err != nil {
		t.Fatal(err)
	}
	lock, err := fx.d.Lock(context.Background(), "state.lock", state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	key, err := SecretKey(fx.d, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := lock.Write(AppliedFile, &Applied{File: f}); err != nil {
		t.Fatal(err)
	}
	if err := WriteDecoded(lock, fx.input(), f, key, fx.ahead); err != nil {
		t.Fatal(err)
	}
}

func (fx *decodeFixture) hit() bool {
	fx.t.Helper()
	c, ok := LookupDecoded(fx.d, fx.input())
	if ok && c.File.Modules["web"].Containers["app"].EnvFile[0] != filepath.Join(fx.dir, "app.env") {
		fx.t.Fatalf("a hit gave env-file %v", c.File.Modules["web"].Containers["app"].EnvFile)
	}
	return ok
}

func TestDecodedHitsOnTheSameInput(t *testing.T) {
	fx := newDecodeFixture(t)
	if !fx.hit() {
		t.Fatal("the same bytes, files, directory and build missed the cache")
	}
}

func TestDecodedMissesOnEachChange(t *testing.T) {
	for name, change := range map[string]func(fx *decodeFixture){
		"mesh file bytes": func(fx *decodeFixture) { fx.data = append(fx.data, '\n') },
		"env-file":        func(fx *decodeFixture) { fx.write("app.env", "A=2\n") },
		"secret file":     func(fx *decodeFixture) { fx.write("db.pw", "hunter3") },
		"config file":     func(fx *decodeFixture) { fx.write("app.conf", "x=2") },
		"secret removed":  func(fx *decodeFixture) { os.Remove(filepath.Join(fx.dir, "db.pw")) },
		"directory": func(fx *decodeFixture) {
			other := t.TempDir()
			for _, n := range []string{"app.env", "db.pw", "app.conf"} {
				b, _ := os.ReadFile(filepath.Join(fx.dir, n))
				os.WriteFile(filepath.Join(other, n), b, 0o600)
			}
			fx.dir = other
		},
		"build": func(fx *decodeFixture) { fx.build = "build-2" },
		"applied.json": func(fx *decodeFixture) {
			lock, _ := fx.d.Lock(context.Background(), "state.lock", state.LockOptions{})
			defer lock.Unlock()
			lock.Write(AppliedFile, &Applied{File: &mesh.File{Modules: map[string]*mesh.Module{"web": {}}}, Source: "other"})
		},
	} {
		t.Run(name, func(t *testing.T) {
			fx := newDecodeFixture(t)
			change(fx)
			if fx.hit() {
				t.Fatalf("a change of the %s still hit the cache", name)
			}
		})
	}
}

func TestDecodedIgnoresAnUnusableCache(t *testing.T) {
	for name, content := range map[string]string{
		"corrupt": `{"version": 1, "entries": [`,
		"newer":   `{"version": 99, "entries": []}`,
	} {
		t.Run(name, func(t *testing.T) {
			fx := newDecodeFixture(t)
			p := filepath.Join(fx.d.Path(), DecodedFile)
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			if fx.hit() {
				t.Fatalf("a %s cache hit", name)
			}
		})
	}
	t.Run("too large", func(t *testing.T) {
		// The cache as written, made too large by white space alone.
		fx := newDecodeFixture(t)
		p := filepath.Join(fx.d.Path(), DecodedFile)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, append(b, strings.Repeat(" ", maxDecodedSize)...), 0o600); err != nil {
			t.Fatal(err)
		}
		if fx.hit() {
			t.Fatal("a cache over the bound hit")
		}
	})
	t.Run("group-writable", func(t *testing.T) {
		fx := newDecodeFixture(t)
		if err := os.Chmod(filepath.Join(fx.d.Path(), DecodedFile), 0o620); err != nil {
			t.Fatal(err)
		}
		if fx.hit() {
			t.Fatal("a group-writable cache hit")
		}
	})
}

func TestDecodedHoldsNoSecret(t *testing.T) {
	fx := newDecodeFixture(t)
	b, err := os.ReadFile(filepath.Join(fx.d.Path(), DecodedFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "A=1") {
		t.Fatalf("the cache holds a file's content: %s", b)
	}
}

func TestListsAheadOnlyForTheRecordedBytes(t *testing.T) {
	fx := newDecodeFixture(t)
	if ListsAhead(fx.d, fx.input()) {
		t.Fatal("ListsAhead = true for bytes recorded without ahead")
	}
	fx.ahead = true
	fx.record()
	if !ListsAhead(fx.d, fx.input()) {
		t.Fatal("ListsAhead = false for the bytes recorded with ahead")
	}
	// The referenced files are not read: a changed secret still lists
	// ahead, and the lookup then misses.
	fx.write("db.pw", "rotated")
	if !ListsAhead(fx.d, fx.input()) || fx.hit() {
		t.Fatal("a rotated secret: want ListsAhead true and a miss")
	}
	for name, change := range map[string]func(*decodeFixture){
		"mesh file bytes": func(fx *decodeFixture) { fx.data = append(fx.data, '\n') },
		"directory":       func(fx *decodeFixture) { fx.dir = t.TempDir() },
		"build":           func(fx *decodeFixture) { fx.build = "build-2" },
	} {
		other := *fx
		change(&other)
		if ListsAhead(other.d, other.input()) {
			t.Errorf("%s changed: ListsAhead = true", name)
		}
	}
}
