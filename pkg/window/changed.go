package window

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// changedNames are the engine names of the containers the step holds
// changed (while-changed).
func (p *plan) changedNames() []string {
	var out []string
	for _, c := range p.def.ChangedNames() {
		out = append(out, mesh.EngineName(p.module, c))
	}
	return out
}

// isChanged reports whether the step holds name changed.
func (p *plan) isChanged(name string) bool { return slices.Contains(p.changedNames(), name) }

// changeOf returns the change the step makes to name.
func (p *plan) changeOf(name string) *mesh.Change {
	return p.def.WhileChanged[name[len(p.module)+1:]]
}

// SpecHash is the SHA-256 of a container's spec label, as a hold records
// it for the normal container of a changed hold.
func SpecHash(label string) string {
	sum := sha256.Sum256([]byte(label))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// changedHold is how the hold records name, held changed, before the open
// touches anything. c is the normal container, nil when there is none.
// The changed copy is made from the last apply's wish, so a container
// never applied cannot be held changed. Nor can one whose aside name is
// taken: a leftover there is not this window's to move.
func (w *window) changedHold(name string, c *engine.Container, observed map[string]engine.Container) (coord.Changed, error) {
	if err := w.changeable(name); err != nil {
		return coord.Changed{}, err
	}
	if _, ok := observed[lifecycle.HeldName(name)]; ok {
		return coord.Changed{}, fault.New(fault.Failed, "nothing held: %s exists already; run meshctl apply, which puts it back, then the window again", lifecycle.HeldName(name))
	}
	if c == nil {
		return coord.Changed{}, nil
	}
	return coord.Changed{Aside: c.ID, Spec: SpecHash(c.Labels[lifecycle.LabelSpec])}, nil
}

// changeable refuses to hold name changed when it was never applied. The
// copy is made from the last apply's wish.
func (w *window) changeable(name string) error {
	if w.desired[name] == nil {
		return fault.New(fault.Failed, "nothing held: %s was never applied, so there is no spec to change; run meshctl apply first", name)
	}
	return nil
}

// changedDesired is the changed copy of name, as the step's change makes
// it from the last apply's wish.
func (w *window) changedDesired(name string) *lifecycle.Desired {
	d := *w.desired[name]
	d.Def = d.Def.Changed(w.changeOf(name))
	networks := d.Spec.Networks
	d.Spec = d.Def.Spec(d.Image)
	d.Spec.Networks = networks
	return &d
}

// switchToChanged sets the stopped normal container c aside, as
// lifecycle.HeldName, and starts the changed copy under the name. The
// copy runs with the normal restart policy, labelled with the window's
// id. It must pass its gate before the step runs. On failure the close
// puts the normal one back, since the hold already records both.
func (w *window) switchToChanged(ctx context.Context, name string, c *engine.Container) error {
	x := lifecycle.Executor{Engine: w.eng, Scope: w.scope, Settle: w.opts.Settle}
	if c != nil {
		if err := x.Rename(ctx, c.ID, lifecycle.HeldName(name)); err != nil {
			return fmt.Errorf("set %s aside as %s: %w", name, lifecycle.HeldName(name), err)
		}
	}
	d := w.changedDesired(name)
	spec := d.EngineSpec(w.scope)
	spec.Labels[lifecycle.LabelWindow] = w.id
	if policy := w.hold.Restart[name]; policy != "" {
		spec.Restart = policy
	}
	if err := x.EnsureNetworks(ctx, d.Spec.Networks); err != nil {
		return fmt.Errorf("create the changed %s: %w", name, err)
	}
	id, err := w.eng.Create(ctx, name, spec)
	if err != nil {
		return fmt.Errorf("create the changed %s: %w", name, err)
	}
	if err := w.recordChanged(ctx, name, id); err != nil {
		return err
	}
	// As every start of lifecycle's: a FIFO or a directory put in a
	// secret's place would be bound, and the copy run without its content.
	if err := lifecycle.CheckFiles(name, spec.Files); err != nil {
		return fmt.Errorf("start the changed %s: %w", name, err)
	}
	if err := w.eng.Start(ctx, id); err != nil {
		return fmt.Errorf("start the changed %s: %w", name, err)
	}
	w.status(name, "changed; waiting for it to be healthy…")
	if _, err := x.WaitHealthy(ctx, id, name); err != nil {
		return fmt.Errorf("the changed %s did not become healthy: %w; the step does not run", name, err)
	}
	if w.opts.Status != nil {
		w.status(name, "running changed")
	} else {
		w.opts.Progress("%s runs changed; the normal one waits aside as %s\n", name, lifecycle.HeldName(name))
	}
	return nil
}

// recordChanged records the changed container's id in the hold, under
// the state lock. Without it, the label with the window's id still names
// the copy for the close and a stale release.
func (w *window) recordChanged(ctx context.Context, name, id string) error {
	lock, err := w.d.Lock(ctx, coord.StateLock, w.opts.Lock)
	if err != nil {
		return fmt.Errorf("record the changed %s: %w", name, err)
	}
	defer lock.Unlock()
	if err := coord.RecordChanged(lock, w.id, name, id); err != nil {
		return fmt.Errorf("record the changed %s: %w", name, err)
	}
	ch := w.hold.Changed[name]
	ch.ID = id
	w.hold.Changed[name] = ch
	return nil
}

// unchange ends the change of name at the close (coord.Unchange).
func (w *window) unchange(ctx context.Context, x lifecycle.Executor, name string, byName map[string]engine.Container) error {
	return coord.Unchange(ctx, x, name, byName, w.hold.Changed[name], w.id)
}
