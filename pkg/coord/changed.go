package coord

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
)

// Unchange ends the change of name that window id's hold records as ch. A
// live close and a stale release both call it, so a container never stays
// changed. The changed copy goes, stopped first. The normal one comes back
// under the name, stopped, to be brought back as any held container.
// byName, the services by name, is updated. A copy that cannot be removed
// stays, and the normal one stays aside (fail closed). A rename back that
// finds the name taken asks the engine what is under it, and tries once
// more: a dead window's create of the copy may have been in flight.
func Unchange(ctx context.Context, x lifecycle.Executor, name string, byName map[string]engine.Container, ch Changed, id string) error {
	ctx, cancel := lifecycle.Cleanup(ctx, bringBackTimeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		err := unchangeOnce(ctx, x, name, byName, ch, id)
		// A name taken that the listing did not have: the copy's create,
		// sent by a window that died, was still in the engine. byName now
		// has what is under the name; try once more.
		if err == nil || attempt == 2 || !errors.Is(err, errNameTaken) {
			return err
		}
	}
}

// errNameTaken marks a rename back that found the name taken. byName then
// has what the engine has under it.
var errNameTaken = errors.New("the name is taken")

func unchangeOnce(ctx context.Context, x lifecycle.Executor, name string, byName map[string]engine.Container, ch Changed, id string) error {
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
		if cur, ierr := x.Engine.Inspect(ctx, name); ierr == nil {
			byName[name] = cur
			err = fmt.Errorf("%w: %w", errNameTaken, err)
		}
		return fmt.Errorf("rename %s back from %s: %w", name, aside.Name, err)
	}
	delete(byName, aside.Name)
	aside.Name = name
	byName[name] = aside
	return nil
}
