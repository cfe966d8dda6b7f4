package coord

import (
	"context"
	"fmt"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
)

// Unchange ends the change of name that window id's hold records as ch. A
// live close and a stale release both call it, so a container never stays
// changed. The changed copy goes, stopped first. The normal one comes back
// under the name, stopped, to be brought back as any held container.
// byName, the services by name, is updated. A copy that cannot be removed
// stays, and the normal one stays aside (fail closed).
func Unchange(ctx context.Context, x lifecycle.Executor, name string, byName map[string]engine.Container, ch Changed, id string) error {
	ctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
	defer cancel()
	cur, there := byName[name]
	if there && IsChanged(cur, ch, id) {
		if err := lifecycle.StopThrough(ctx, x.Engine, cur.ID, lifecycle.StopTimeoutOf(cur)); err != nil {
			return fmt.Errorf("stop the changed %s: %w; it stays, changed", name, err)
		}
		if err := x.RemoveGone(ctx, cur.ID); err != nil {
			return fmt.Errorf("remove the changed %s: %w; it stays, stopped", name, err)
		}
		delete(byName, name)
		there = false
	}
	aside, ok := byName[lifecycle.HeldName(name)]
	switch {
	case !ok:
		return nil // never set aside, or back already
	case there:
		return fmt.Errorf("%s is under its name and is not window %s's changed copy, while the normal one waits aside as %s: both stay as they are",
			name, id, aside.Name)
	}
	if err := x.Rename(ctx, aside.ID, name); err != nil {
		return fmt.Errorf("rename %s back from %s: %w", name, aside.Name, err)
	}
	delete(byName, aside.Name)
	aside.Name = name
	byName[name] = aside
	return nil
}
