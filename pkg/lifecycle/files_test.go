package lifecycle

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// TestPutBackLeavesASwappedFileStopped: a put-back (a failed recreate's,
// or the heal's of a dead apply's) does not start the old container when
// its secret file is a FIFO now. The start would bind the FIFO. The old
// one is back under its name, stopped, and the error names the file.
func TestPutBackLeavesASwappedFileStopped(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "token")
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	spec := engine.Spec{Image: "old:1", Files: map[string]string{"/run/secrets/token": file},
		Labels: map[string]string{engine.LabelHidden: `{"/run/secrets/token":"` + file + `"}`}}
	for _, how := range []string{"PutBack", "StartOld"} {
		t.Run(how, func(t *testing.T) {
			f := enginetest.NewFake("old:1")
			name := OldName("m.c")
			if how == "StartOld" {
				name = "m.c"
			}
			oldID, err := f.Create(ctx, name, spec)
			if err != nil {
				t.Fatal(err)
			}
			old, _ := f.Inspect(ctx, oldID)
			old.Running = true // it ran before the recreate stopped it
			x := Executor{Engine: f}
			if how == "PutBack" {
				err = x.PutBack(ctx, "m.c", "", old)
			} else {
				err = x.StartOld(ctx, "m.c", old)
			}
			var nr *FileNotRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "a named pipe") {
				t.Fatalf("%s = %v, want a refusal naming %s and a named pipe", how, err, file)
			}
			if after, _ := f.Inspect(ctx, oldID); after.Running || after.Name != "m.c" {
				t.Errorf("the old container is %q, running %v: want it under its name, stopped", after.Name, after.Running)
			}
		})
	}
}
