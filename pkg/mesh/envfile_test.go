package mesh

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
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
	if !errors.As(err, &ee) || ee.Fault() != fault.BadInput || !strings.Contains(err.Error(), "missing.env") {
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

// TestLoadEnvReadsOnlyRegularFiles: an env-file that is a FIFO is refused
// at once (open(2) of a FIFO without a writer would block forever, deaf to
// signals), /dev/zero is refused before it fills memory, and a file over
// MaxEnvFileSize is refused. Each error names the file and no content.
func TestLoadEnvReadsOnlyRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.env")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.env")
	os.WriteFile(big, []byte("A="+strings.Repeat("x", MaxEnvFileSize)+"\n"), 0o600)
	atLimit := filepath.Join(dir, "at-limit.env")
	os.WriteFile(atLimit, []byte("A="+strings.Repeat("x", MaxEnvFileSize-3)+"\n"), 0o600)
	for _, tt := range []struct{ path, want string }{
		{fifo, "is not a regular file (a named pipe)"},
		{"/dev/zero", "is not a regular file (a device)"},
		{dir, "is not a regular file (a directory)"},
		{big, "is larger than 1 MiB"},
		{atLimit, ""},
	} {
		c := Container{}
		c.EnvFile = StringOrList{tt.path}
		done := make(chan error, 1)
		go func() {
			_, err := c.LoadEnv("web.app")
			done <- err
		}()
		select {
		case err := <-done:
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s: %v", tt.path, err)
			case tt.want == "":
			case err == nil || !strings.Contains(err.Error(), "env-file "+tt.path+": "+tt.want):
				t.Errorf("%s: err = %v, want …%s", tt.path, err, tt.want)
			case strings.Contains(err.Error(), "xxx"):
				t.Errorf("%s: the error quotes the file: %v", tt.path, err)
			}
		case <-time.After(20 * time.Second): // a hang guard, not a timing
			t.Fatalf("LoadEnv(%s) still reads after 20s", tt.path)
		}
	}
}

// TestLoadEnvRefusesControlCharacters: an env-file value may hold no
// control character but tab; the error names the file, the line and the
// key, never the value.
func TestLoadEnvRefusesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "app.env")
	for _, tt := range []struct{ content, want string }{
		{"A=1\nPW=S3CRET\x00\n", "line 2: the value of PW holds a control character (NUL)"},
		{"PW=\"S3CRET\x1b[0m\"\n", "line 1: the value of PW holds a control character (U+001B)"},
		{"PW=S3CRET\x7f\n", "line 1: the value of PW holds a control character (U+007F)"},
		{"TSV=a\tb\r\n", ""},
	} {
		os.WriteFile(p, []byte(tt.content), 0o600)
		c := Container{}
		c.EnvFile = StringOrList{p}
		env, err := c.LoadEnv("web.app")
		switch {
		case tt.want == "" && (err != nil || env["TSV"] != "a\tb"):
			t.Errorf("%q: env %q, err %v", tt.content, env, err)
		case tt.want == "":
		case err == nil || !strings.Contains(err.Error(), "env-file "+p+": "+tt.want):
			t.Errorf("%q: err = %v, want …%s", tt.content, err, tt.want)
		case strings.Contains(err.Error(), "S3CRET"):
			t.Errorf("the error quotes the value: %v", err)
		}
	}
}

// TestLoadReadsOnlyRegularFiles: a mesh file that is a FIFO is refused at
// once, with how to read a pipe; /dev/zero too.
func TestLoadReadsOnlyRegularFiles(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "mesh.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, "/dev/zero"} {
		done := make(chan error, 1)
		go func() {
			_, err := Load(path, nil)
			done <- err
		}()
		select {
		case err := <-done:
			checkRefusal(t, err, path, 0, "", `is not a regular file`)
			if err != nil && !strings.Contains(err.Error(), `give "-f -"`) {
				t.Errorf("Load(%s) = %v, want how to read a pipe", path, err)
			}
		case <-time.After(20 * time.Second): // a hang guard, not a timing
			t.Fatalf("Load(%s) still reads after 20s", path)
		}
	}
}

// TestLoadContextStopsReadingStdin: a stdin nobody writes to does not keep
// a signalled command waiting: LoadContext returns the context's error.
func TestLoadContextStopsReadingStdin(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := LoadContext(ctx, "-", r)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("LoadContext = %v, want context.Canceled", err)
		}
	case <-time.After(20 * time.Second): // a hang guard, not a timing
		t.Fatal("LoadContext still reads stdin after 20s")
	}
}
