package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadConfigFileBounded (every read bounded): the
// config file is read only when it is a regular file of at most 64 KiB; a
// FIFO no one writes, /dev/zero and a directory are refused without being
// read (the first would block in open(2), the second be read until memory
// runs out).
func TestReadConfigFileBounded(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		data := "state-dir: /var/lib/meshctl\n" + strings.Repeat("#", max(size-28, 0))
		if err := os.WriteFile(p, []byte(data[:size]), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, want string }{
		{write("ok.yaml", 28), ""},
		{write("full.yaml", maxConfigSize), ""},
		{write("big.yaml", maxConfigSize+1), "larger than 64 KiB"},
		{fifo, "not a regular file"},
		{"/dev/zero", "not a regular file"},
		{dir, "not a regular file"},
	} {
		data, err := readConfigFile(tt.path)
		switch {
		case tt.want == "" && (err != nil || !strings.HasPrefix(string(data), "state-dir:")):
			t.Errorf("%s: %q, %v", filepath.Base(tt.path), data, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want …%s…", filepath.Base(tt.path), err, tt.want)
		}
	}
}
