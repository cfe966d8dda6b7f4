package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// FileNotRegularError is a start of container Name refused before it was
// asked of the engine. Its callers name the container. The host file it binds at Target, File, is there,
// but Found is in its place, not a regular file. A start binds what is at
// the path then, so the container would run without the file's content.
type FileNotRegularError struct {
	Name, Target, File, Found string
}

func (e *FileNotRegularError) Error() string {
	return fmt.Sprintf("not started: the file it binds at %s, %s, is %s, not a regular file, so it stays stopped; make it a regular file again, then run meshctl apply",
		e.Target, e.File, e.Found)
}

// BoundFiles returns the secret and config files container c binds, by
// the path c sees each at. They are read from its labels
// (engine.LabelHidden), which meshctl sets on every container it creates.
func BoundFiles(c engine.Container) map[string]string {
	var files map[string]string
	if raw := c.Labels[engine.LabelHidden]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &files) // a label not ours binds nothing we know
	}
	return files
}

// CheckFiles returns a *FileNotRegularError when one of files (host files
// by the path container name sees them at) is not a regular file. A
// missing file is left to the engine, which refuses the start and says
// so. So is a file that cannot be looked at: the engine may still read it.
func CheckFiles(name string, files map[string]string) error {
	for _, target := range slices.Sorted(maps.Keys(files)) {
		fi, err := os.Stat(files[target])
		if err != nil || fi.Mode().IsRegular() {
			continue
		}
		return &FileNotRegularError{Name: name, Target: target, File: files[target], Found: mesh.FileKind(fi.Mode())}
	}
	return nil
}

// Start starts container c after CheckFiles. The starts of lifecycle and
// coord go through it or startNew. A FIFO or a directory put in a
// secret's place would otherwise be bound, and the container would run
// without its content.
func (x Executor) Start(ctx context.Context, c engine.Container) error {
	if err := CheckFiles(c.Name, BoundFiles(c)); err != nil {
		return err
	}
	return x.Engine.Start(ctx, c.ID)
}

// startNew starts id, just created for d, after CheckFiles.
func (x Executor) startNew(ctx context.Context, d *Desired, id string) error {
	if err := CheckFiles(d.Name, d.EngineSpec(x.Scope).Files); err != nil {
		return err
	}
	return x.Engine.Start(ctx, id)
}
