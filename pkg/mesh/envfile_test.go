package mesh

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadEnv(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.env")
	os.WriteFile(a, []byte("# comment\nexport A=1\nB=\"two words\"\nC=3\n\n"), 0o600)
	b := filepath.Join(dir, "b.env")
	os.WriteFile(b, []byte("C=4\n"), 0o600)
	c := Container{Env: map[string]string{"A": "env"}}
	c.EnvFile = StringOrList{a, b}
	env, err := c.LoadEnv("web.app")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"A": "env", "B": "two words", "C": "4"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env = %v, want %v", env, want)
	}
	c.EnvFile = StringOrList{filepath.Join(dir, "missing.env")}
	_, err = c.LoadEnv("web.app")
	var ee *EnvFileError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(err.Error(), "missing.env") {
		t.Errorf("missing file: %v", err)
	}
	os.WriteFile(a, []byte("SECRET hunter2\n"), 0o600)
	c.EnvFile = StringOrList{a}
	if _, err = c.LoadEnv("web.app"); err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad line: %v (must name the line, never the value)", err)
	}
}

// TestLoadMakesEnvFilesAbsolute: a relative env-file is from the mesh
// file's directory, whatever the working directory of a window's close.
func TestLoadMakesEnvFilesAbsolute(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mesh.yaml")
	os.WriteFile(p, []byte("modules:\n  m:\n    containers:\n      c:\n        image: x\n        env-file: [app.env, /etc/x.env]\n"), 0o600)
	f, err := Load(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Modules["m"].Containers["c"].EnvFile; !slices.Equal(got, []string{filepath.Join(dir, "app.env"), "/etc/x.env"}) {
		t.Errorf("EnvFile = %q", got)
	}
}
