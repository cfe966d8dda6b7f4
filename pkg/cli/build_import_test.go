package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestImportReadsBounded (every read bounded): build
// import reads a regular file or a pipe, never a device or a directory
// (/dev/zero would be read until memory runs out), and refuses an input
// larger than its bound; both are bad input (exit 2).
func TestImportReadsBounded(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "ledger.jsonl")
	if err := os.WriteFile(regular, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path, want string // want: "" to open
	}{
		{regular, ""},
		{"/dev/zero", "is not a regular file or a pipe (a device)"},
		{dir, "is not a regular file or a pipe (a directory)"},
	} {
		f, err := openImport(tt.path)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.path, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want …%s…", tt.path, err, tt.want)
		case tt.want != "" && !isUsage(err):
			t.Errorf("%s: %T, want a usage error (exit 2)", tt.path, err)
		}
		if f != nil {
			f.Close()
		}
	}
	// A FIFO opens once its writer does (as an export piped in does).
	go func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Write([]byte("{}\n"))
			w.Close()
		}
	}()
	f, err := openImport(fifo)
	if err != nil {
		t.Fatalf("a FIFO: %v", err)
	}
	data, err := readImport(f, fifo, 16)
	f.Close()
	if err != nil || string(data) != "{}\n" {
		t.Fatalf("a FIFO read %q, %v", data, err)
	}

	if data, err := readImport(strings.NewReader(strings.Repeat("x", 16)), "stdin", 16); err != nil || len(data) != 16 {
		t.Errorf("16 bytes of 16: %d, %v", len(data), err)
	}
	_, err = readImport(strings.NewReader(strings.Repeat("x", 17)), "stdin", 16)
	if err == nil || !strings.Contains(err.Error(), "import: stdin is larger than") || !isUsage(err) {
		t.Errorf("17 bytes of 16: %v, want a usage error", err)
	}
}

func isUsage(err error) bool {
	var u *UsageError
	return errors.As(err, &u)
}
