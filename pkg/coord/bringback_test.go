package coord

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestBringBackCreatesAMissingNetwork: a container a window brings back (its
// close, or the release of a dead window's hold) whose module network was
// removed meanwhile finds it created first, labelled as the state
// directory's, with the definition its recorded spec holds; an external
// network that is missing is an error that says meshctl never creates one,
// and the container is not started.
func TestBringBackCreatesAMissingNetwork(t *testing.T) {
	ctx := context.Background()
	eng := enginetest.NewFake(busybox)
	x := lifecycle.Executor{Engine: eng, Scope: "scope-1"}
	spec := mesh.Spec{V: mesh.SpecVersion, Image: busybox, Networks: map[string]mesh.SpecNetwork{
		"meshctl.m.back": {Internal: true}}}
	eng.AddNetwork("meshctl.m.back", nil)
	id, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Networks: map[string][]string{"meshctl.m.back": {"c"}},
		Labels: map[string]string{lifecycle.LabelManaged: "scope-1", lifecycle.LabelSpec: spec.Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.RemoveNetwork(ctx, "meshctl.m.back"); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	c, _ := eng.Inspect(ctx, id)
	if err := BringBack(ctx, x, c, "always"); err != nil {
		t.Fatal(err)
	}
	if got := eng.Changes(); len(got) == 0 || got[0] != "create-network meshctl.m.back" {
		t.Errorf("changes %v: the network is not created first", got)
	}
	nets := eng.NetworkList()
	if len(nets) != 1 || !nets[0].Internal || nets[0].Labels[lifecycle.LabelManaged] != "scope-1" || nets[0].Labels[lifecycle.LabelModule] != "m" ||
		nets[0].Labels[lifecycle.LabelNetwork] != "back" {
		t.Errorf("networks %+v", nets)
	}

	ext := mesh.Spec{V: mesh.SpecVersion, Image: busybox, Networks: map[string]mesh.SpecNetwork{"proxy": {}}}
	id2, err := eng.Create(ctx, "m.d", engine.Spec{Image: busybox, Labels: map[string]string{lifecycle.LabelManaged: "scope-1", lifecycle.LabelSpec: ext.Encode()}})
	if err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	c2, _ := eng.Inspect(ctx, id2)
	var missing *lifecycle.MissingNetworkError
	if err := BringBack(ctx, x, c2, "always"); !errors.As(err, &missing) || missing.Name != "proxy" {
		t.Errorf("BringBack with an external network missing: %v", err)
	}
	if got := eng.Changes(); len(got) > 0 {
		t.Errorf("changes %v, want none: an external network is never created, the container not started", got)
	}
}

// TestBringBackLeavesASwappedFileStopped: a held container whose secret
// file is a FIFO or a directory now is not started, since the start would
// bind what is at the path. It stays stopped, its restart policy
// untouched, and the error names the file and what is in its place. A
// regular file there again lets it start.
func TestBringBackLeavesASwappedFileStopped(t *testing.T) {
	ctx := context.Background()
	for _, found := range []string{"a named pipe", "a directory"} {
		t.Run(found, func(t *testing.T) {
			eng := enginetest.NewFake(busybox)
			x := lifecycle.Executor{Engine: eng, Scope: "scope-1"}
			file := filepath.Join(t.TempDir(), "token")
			var err error
			if found == "a named pipe" {
				err = syscall.Mkfifo(file, 0o600)
			} else {
				err = os.Mkdir(file, 0o700)
			}
			if err != nil {
				t.Fatal(err)
			}
			id, err := eng.Create(ctx, "m.c", engine.Spec{Image: busybox, Restart: "no", Files: map[string]string{"/run/secrets/token": file},
				Labels: map[string]string{lifecycle.LabelManaged: "scope-1", engine.LabelHidden: `{"/run/secrets/token":"` + file + `"}`}})
			if err != nil {
				t.Fatal(err)
			}
			c, _ := eng.Inspect(ctx, id)
			err = BringBack(ctx, x, c, "always")
			var nr *lifecycle.FileNotRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), found) {
				t.Fatalf("BringBack = %v, want a refusal naming %s and %s", err, file, found)
			}
			if after, _ := eng.Inspect(ctx, id); after.Running || after.RestartPolicy != "no" {
				t.Errorf("after the refusal the container runs %v with restart %q, want stopped with restart no", after.Running, after.RestartPolicy)
			}
			if err := os.Remove(file); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, []byte("tok\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := BringBack(ctx, x, c, "always"); err != nil {
				t.Fatalf("BringBack with the file back = %v", err)
			}
			if after, _ := eng.Inspect(ctx, id); !after.Running {
				t.Error("with the file back the container does not run")
			}
		})
	}
}
