package apply

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// slotNeed is a module that the plan takes down on this host, and the
// containers it stops.
type slotNeed struct {
	module     string
	budget     int
	containers []string
	bound      time.Duration
}

// slotsNeeded ends a pass whose plan takes down a module whose slot this
// apply does not hold. Run takes the slots with no lock held, then plans
// again.
type slotsNeeded struct{ needs []slotNeed }

func (e *slotsNeeded) Error() string {
	var ms []string
	for _, n := range e.needs {
		ms = append(ms, n.module)
	}
	return "the plan needs the slots of " + strings.Join(ms, ", ")
}

// slotNeeds returns the modules with a budget that the plan takes down and
// whose slot this apply does not hold. A module is down from a stop
// meshctl makes until it runs healthy again. So a stop-first recreate of a
// running container takes a slot, and so does a network replace of the
// running containers on it. A start-first recreate, a create, a repair of
// a container already down and a removal take none.
func (a *pass) slotNeeds() error {
	if len(a.file.Budgeted()) == 0 {
		return nil
	}
	by := map[string]*slotNeed{}
	add := func(module, name string, d *lifecycle.Desired) {
		budget := a.file.Modules[module].Budget()
		if budget == 0 || a.opts.Budget.Holds(module) {
			return
		}
		n := by[module]
		if n == nil {
			n = &slotNeed{module: module, budget: budget}
			by[module] = n
		}
		if !slices.Contains(n.containers, name) {
			n.containers = append(n.containers, name)
			n.bound += lifecycle.ChangeBound(d)
		}
	}
	desired := map[string]*lifecycle.Desired{}
	for i := range a.desired {
		desired[a.desired[i].Name] = &a.desired[i]
	}
	for _, it := range a.items {
		if it.Action == Recreate && it.Observed != nil && it.Observed.Running && !lifecycle.StartsFirst(it.Desired, true) {
			add(it.Module, it.Name, it.Desired)
		}
	}
	for _, n := range a.netItems {
		if n.Action != Recreate {
			continue
		}
		for _, c := range a.networkUsers(n.Name) {
			if c.Running {
				add(c.Labels[lifecycle.LabelModule], c.Name, desired[c.Name])
			}
		}
	}
	if len(by) == 0 {
		return nil
	}
	if a.opts.DryRun {
		// A dry run takes nothing. It says what the apply would take.
		for _, m := range sortedKeys(by) {
			a.opts.Progress("would take a slot of module %s (max-unavailable %d) for %s\n", m, by[m].budget, strings.Join(by[m].containers, ", "))
		}
		return nil
	}
	out := &slotsNeeded{}
	for _, n := range by {
		out.needs = append(out.needs, *n)
	}
	sort.Slice(out.needs, func(i, j int) bool { return out.needs[i].module < out.needs[j].module })
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// publishFirst writes the member records that changed before anything
// is touched. A host that runs a module of the mesh is then known to the
// other hosts first. So a gathering never misses it. It makes no etcd
// call when no record changed. etcd unreachable changes nothing.
func publishFirst(ctx context.Context, opts Options) error {
	if opts.Budget == nil || opts.DryRun || len(opts.File.MeshModules()) == 0 {
		return nil
	}
	if err := opts.Budget.Publish(ctx, opts.File, nil); err != nil {
		return fmt.Errorf("the mesh's member records could not be written, so nothing was changed: %w", err)
	}
	return nil
}

// dryRunMembers says which member records the apply would write or
// remove in etcd. It reads mesh.json only: a dry run makes no etcd call.
func dryRunMembers(opts Options) {
	if opts.Budget == nil || !opts.DryRun {
		return
	}
	puts, gone, err := opts.Budget.Pending(opts.File, opts.RemoveModules)
	if err != nil {
		opts.Warn("cannot say which member records of the mesh would change: %v\n", err)
		return
	}
	for _, m := range puts {
		opts.Progress("would record host %s in etcd as a member of module %s (%s)\n", m.Host, m.Module, memberText(opts.File.Modules[m.Module]))
	}
	for _, name := range gone {
		opts.Progress("would remove host %s's member record of module %s from etcd\n", opts.Budget.Host, name)
	}
}

// memberText is why module m is a member of the mesh: its budget and its
// mesh: all steps.
func memberText(m *mesh.Module) string {
	var parts []string
	if m.Budget() > 0 {
		parts = append(parts, fmt.Sprintf("max-unavailable %d", m.Budget()))
	}
	for _, n := range m.MeshSteps() {
		parts = append(parts, "step "+n+" "+m.Steps[n].MeshText())
	}
	return strings.Join(parts, "; ")
}

// takeSlots takes the slots a plan needs, in module order, with no lock
// held. The member records go first, so that other hosts see this host's
// budget.
func takeSlots(ctx context.Context, opts Options, sn *slotsNeeded) error {
	if err := opts.Budget.Publish(ctx, opts.File, nil); err != nil {
		return fmt.Errorf("the mesh's member records could not be written, so nothing was taken down: %w", err)
	}
	for _, n := range sn.needs {
		opts.Progress("taking a slot of module %s (max-unavailable %d) for %s\n", n.module, n.budget, strings.Join(n.containers, ", "))
		if err := opts.Budget.Take(ctx, n.module, n.budget, n.containers, n.bound); err != nil {
			return err
		}
	}
	return nil
}

// settleBudget gives back the slots of the modules that run healthy
// again, and writes the member records that changed. A module runs healthy
// once no container of it failed in this apply. One that failed keeps its
// slot, given back by the next apply that finds it healthy. Without a
// report, the apply stopped before any change, and only this apply's own
// slots are given back.
func settleBudget(ctx context.Context, opts Options, rep *record.Report, runErr error) error {
	b := opts.Budget
	if b == nil || opts.DryRun {
		return nil
	}
	defer b.Close()
	recorded, used, err := b.Recorded()
	if err != nil {
		return err
	}
	if !used && len(b.HeldModules()) == 0 && len(opts.File.MeshModules()) == 0 {
		// No module uses the mesh, and none did: no etcd call.
		return nil
	}
	var healthy []string
	if rep == nil {
		healthy = b.HeldModules()
	} else {
		failed := map[string]bool{}
		for _, c := range rep.Containers {
			if c.Action == Failed {
				failed[c.Module] = true
			}
		}
		// A module removed is not down: it no longer runs here.
		for _, m := range append(recorded, b.HeldModules()...) {
			known := opts.File.Modules[m] != nil || b.Holds(m) || slices.Contains(opts.RemoveModules, m)
			if !failed[m] && known && !slices.Contains(healthy, m) {
				healthy = append(healthy, m)
			}
		}
	}
	// The containers are as the apply left them. A slot not given back
	// only makes other hosts wait, so it is a warning.
	if err := b.GiveBack(ctx, healthy); err != nil {
		opts.Warn("%v\n", err)
	}
	if runErr == nil {
		if err := b.Publish(ctx, opts.File, opts.RemoveModules); err != nil {
			opts.Warn("the mesh's member records were not written (the next apply tries again): %v\n", err)
		}
	}
	return nil
}
