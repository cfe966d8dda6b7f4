package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestHideFiles checks that a secret or config file's content is hidden in
// what the engine says of its container: whole, trimmed, and line by line.
// A short line such as "1" stays, as a short env value does. A file that
// cannot be read withholds the text.
func TestHideFiles(t *testing.T) {
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw.txt")
	conf := filepath.Join(dir, "app.conf")
	if err := os.WriteFile(pw, []byte("s3cr3t-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("listen 8080\nuser admin:hunter2\n1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	label, _ := json.Marshal(map[string]string{"/run/secrets/pw": pw, "/app.conf": conf})
	files, ok := hiddenFiles(map[string]string{LabelHidden: string(label)})
	if !ok {
		t.Fatal("hiddenFiles could not read the files")
	}
	got := hideFiles("pw=s3cr3t-pw; conf has user admin:hunter2; exited 1", files)
	want := "pw=[content of /run/secrets/pw]; conf has [content of /app.conf]; exited 1"
	if got != want {
		t.Errorf("hideFiles = %q, want %q", got, want)
	}

	if _, ok := hiddenFiles(map[string]string{}); !ok {
		t.Error("a container without hidden files withholds its text")
	}
	gone, _ := json.Marshal(map[string]string{"/run/secrets/pw": filepath.Join(dir, "gone")})
	if _, ok := hiddenFiles(map[string]string{LabelHidden: string(gone)}); ok {
		t.Error("a hidden file that cannot be read does not withhold the text")
	}
	// A FIFO in a secret's place (a rotation gone wrong) is refused at
	// once: open(2) of one without a writer blocks for ever.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	named, _ := json.Marshal(map[string]string{"/run/secrets/pw": fifo})
	done := make(chan bool, 1)
	go func() {
		_, ok := hiddenFiles(map[string]string{LabelHidden: string(named)})
		done <- ok
	}()
	select {
	case ok := <-done:
		if ok {
			t.Error("a FIFO as a hidden file does not withhold the text")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hiddenFiles waits on a FIFO in a hidden file's place")
	}
	if _, ok := hiddenFiles(map[string]string{LabelHidden: "{not json"}); ok {
		t.Error("an unreadable label does not withhold the text")
	}
}
