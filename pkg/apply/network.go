package apply

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// Kept is a network apply would remove but leaves, because a container is
// still attached to it.
const Kept Action = "kept"

// NetItem is the plan for one network meshctl creates. External networks
// are never planned, since meshctl neither creates nor removes them.
type NetItem struct {
	Name     string // engine name
	Module   string
	Action   Action // Create, Unchanged, Recreate, Remove or Orphan; Kept or Failed once carried out
	Reasons  []string
	Desired  *mesh.DesiredNetwork
	Observed *engine.Network
}

// NetInput is what the network plan is decided from.
type NetInput struct {
	Desired []mesh.DesiredNetwork
	// Observed are the networks this state directory created.
	Observed []engine.Network
	// Modules, Remove and Prune are as for the containers (Input).
	Modules map[string]bool
	Remove  map[string]bool
	Prune   bool
}

// PlanNetworks returns one item per desired or created network, in name
// order. Like Plan, it is a pure function of its input.
func PlanNetworks(in NetInput) []NetItem {
	observed := map[string]*engine.Network{}
	for i := range in.Observed {
		observed[in.Observed[i].Name] = &in.Observed[i]
	}
	var items []NetItem
	for i := range in.Desired {
		d := &in.Desired[i]
		it := NetItem{Name: d.Name, Module: d.Module, Desired: d, Observed: observed[d.Name]}
		switch o := it.Observed; {
		case o == nil:
			it.Action = Create
		case o.Internal != d.Internal:
			// The engine changes no network in place. It is made again
			// (replaceNetworks), and its containers recreated.
			it.Action, it.Reasons = Recreate, []string{fmt.Sprintf("internal: %v → %v", o.Internal, d.Internal)}
		default:
			it.Action = Unchanged
		}
		items = append(items, it)
		delete(observed, d.Name)
	}
	for _, o := range observed {
		module := o.Labels[lifecycle.LabelModule]
		if in.Modules != nil && !in.Modules[module] {
			continue
		}
		it := NetItem{Name: o.Name, Module: module, Observed: o}
		it.Action, it.Reasons = unlisted(module, in.Remove[module], in.Prune)
		items = append(items, it)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return items
}

// usesNetworks reports whether an apply must look at networks. It must if
// the file declares or joins some, or if it may remove a module's.
func usesNetworks(f *mesh.File, desired []lifecycle.Desired, opts Options) bool {
	if opts.Prune || len(opts.RemoveModules) > 0 {
		return true
	}
	for _, m := range f.Modules {
		if len(m.Networks) > 0 {
			return true
		}
	}
	return slices.ContainsFunc(desired, func(d lifecycle.Desired) bool { return len(d.Spec.Networks) > 0 })
}

// observeNetworks lists the networks this state directory created, in one
// engine call. It does so only when the apply needs them (usesNetworks). An
// apply of a file without networks makes no request for them.
func (a *pass) observeNetworks(ctx context.Context) error {
	a.netObserved = nil
	if !usesNetworks(a.file, a.desired, a.opts) {
		return nil
	}
	observed, err := a.eng.Networks(ctx, lifecycle.Managed(a.scope))
	if err != nil {
		return err
	}
	a.netObserved = slices.DeleteFunc(observed, func(n engine.Network) bool { return !lifecycle.IsOwnNetwork(n, a.scope) })
	return nil
}

// planNetworks plans the networks (PlanNetworks). Before anything changes,
// it checks for what the plan cannot do. A network to create may have its
// name taken by a network meshctl did not create. A network whose
// definition changed may be one apply cannot make again (checkReplaceable).
// A joined network may not exist, and this apply may not create it.
func (a *pass) planNetworks(ctx context.Context) error {
	a.netItems = nil
	if !usesNetworks(a.file, a.desired, a.opts) {
		return nil
	}
	observed := a.netObserved
	a.netItems = PlanNetworks(NetInput{Desired: a.file.DesiredNetworks(), Observed: observed,
		Modules: a.in.Modules, Remove: a.in.Remove, Prune: a.opts.Prune})
	have := map[string]bool{}
	for _, n := range observed {
		have[n.Name] = true
	}
	for _, it := range a.netItems {
		switch it.Action {
		case Recreate:
			if err := a.checkReplaceable(ctx, it); err != nil {
				return err
			}
		case Create:
			n, err := a.eng.InspectNetwork(ctx, it.Name)
			if err == nil {
				return &NetworkConflictError{Name: it.Name, Owner: n.Labels[lifecycle.LabelManaged]}
			}
			if !engine.IsNotFound(err) {
				return err
			}
			have[it.Name] = true
		}
	}
	return a.checkJoined(ctx, have)
}

// checkJoined checks that each network joined by a container to create or
// recreate exists. Else this apply must create it (have).
func (a *pass) checkJoined(ctx context.Context, have map[string]bool) error {
	for _, it := range a.items {
		if it.Desired == nil || it.Action != Create && it.Action != Recreate {
			continue
		}
		for _, name := range slices.Sorted(maps.Keys(it.Desired.Spec.Networks)) {
			if have[name] {
				continue
			}
			_, err := a.eng.InspectNetwork(ctx, name)
			switch {
			case err == nil:
				have[name] = true
			case !engine.IsNotFound(err):
				return err
			case strings.HasPrefix(name, "meshctl."):
				owner, net, _ := mesh.NetworkOwner(name)
				return missingJoin(it.Name, name,
					fmt.Sprintf("it is module %s's network %s, which is not applied here: apply module %s first", owner, net, owner))
			default:
				return missingJoin(it.Name, name,
					fmt.Sprintf("it is external, and meshctl never creates one: create it (docker network create %s) or drop it from the mesh file", name))
			}
		}
	}
	return nil
}

// createNetworks creates the networks the plan creates. It runs before any
// container changes, since the containers that join them need them.
func (a *pass) createNetworks(ctx context.Context) error {
	for i := range a.netItems {
		it := &a.netItems[i]
		if it.Action != Create {
			continue
		}
		a.opts.Progress("creating network %s\n", it.Name)
		spec := lifecycle.NetworkSpec(a.scope, it.Module, it.Desired.Net, it.Desired.Internal)
		if _, err := (lifecycle.Executor{Engine: a.eng, Scope: a.scope}).CreateNetwork(ctx, it.Name, spec); err != nil {
			it.Action, it.Reasons = Failed, append(it.Reasons, "create failed: "+engine.Reason(err.Error()))
			a.fillNetworks()
			return fmt.Errorf("create network %s: %w", it.Name, err)
		}
	}
	return nil
}

// removeNetworks removes the networks the plan removes, once the containers
// are done. It removes each only when no container is attached to it. That
// holds for running and stopped containers, of this state directory or
// not. A stopped container outside the state directory is not seen, since
// the engine lists only running ones. A network still in use is kept, with
// a warning.
func (a *pass) removeNetworks(ctx context.Context) error {
	var remove []int
	for i, it := range a.netItems {
		if it.Action == Remove {
			remove = append(remove, i)
		}
	}
	if len(remove) == 0 {
		return nil
	}
	ours, err := a.eng.List(ctx, lifecycle.Managed(a.scope))
	if err != nil {
		return err
	}
	var errs []error
	for _, i := range remove {
		it := &a.netItems[i]
		n, err := a.eng.InspectNetwork(ctx, it.Name)
		if engine.IsNotFound(err) {
			continue
		}
		if err == nil {
			users := slices.Clone(n.Containers)
			for _, c := range ours {
				if lifecycle.JoinsNetwork(c, it.Name) && !slices.Contains(users, c.Name) {
					users = append(users, c.Name)
				}
			}
			if len(users) > 0 {
				slices.Sort(users)
				it.Action = Kept
				it.Reasons = append(it.Reasons, "still in use by "+strings.Join(users, ", "))
				again := "apply --prune"
				if a.in.Remove[it.Module] {
					again = "apply --remove-module " + it.Module
				}
				a.opts.Warn("network %s kept: containers are attached to it (%s); once they are gone, %s removes it\n",
					it.Name, strings.Join(users, ", "), again)
				continue
			}
			a.opts.Progress("removing network %s\n", it.Name)
			err = a.eng.RemoveNetwork(ctx, n.ID)
		}
		if err != nil {
			it.Action, it.Reasons = Failed, append(it.Reasons, "remove failed: "+engine.Reason(err.Error()))
			errs = append(errs, fmt.Errorf("remove network %s: %w", it.Name, err))
		}
	}
	a.fillNetworks()
	if len(errs) > 0 {
		return &FailedError{Err: errors.Join(errs...)}
	}
	return nil
}

// fillNetworks writes the network plan into the report.
func (a *pass) fillNetworks() {
	a.rep.Networks = nil
	for _, it := range a.netItems {
		a.rep.Networks = append(a.rep.Networks, record.NetworkReport{Name: it.Name, Module: it.Module,
			Action: it.Action, Reasons: append([]string{}, it.Reasons...)})
	}
}

// checkReplaceable refuses, before any change, to make network it again
// while a container this apply cannot take off it and put back is
// attached. Such a container is outside this state directory, or held by
// a live window. Or it is of a module this apply does not converge. Its
// spec records the network's definition. It would be stopped and moved
// outside any plan. Its recorded spec would then differ from the container.
func (a *pass) checkReplaceable(ctx context.Context, it NetItem) error {
	n, err := a.eng.InspectNetwork(ctx, it.Name)
	if err != nil {
		return err
	}
	ours := map[string]bool{}
	steps := map[string]string{}
	for _, c := range a.windows.Observed {
		if lifecycle.IsStep(c, a.scope) {
			steps[c.Name] = c.Labels[lifecycle.LabelModule]
		}
		if lifecycle.IsService(c, a.scope) && lifecycle.JoinsNetwork(c, it.Name) {
			ours[c.Name] = true
			if hold, held := a.in.Holds[c.Name]; held {
				return &ChangedNetworkError{Name: it.Name, Module: it.Module, Change: it.Reasons[0],
					Why: c.Name + " joins it and window " + hold.Window + " holds it: apply again once the window has closed"}
			}
			if m := c.Labels[lifecycle.LabelModule]; !a.in.Modules[m] {
				return &ChangedNetworkError{Name: it.Name, Module: it.Module, Change: it.Reasons[0],
					Why: c.Name + " of module " + m + ", which this apply does not converge, joins it: apply module " + m +
						" in the same file as module " + it.Module + " (its containers are then recreated in the plan)"}
			}
		}
	}
	for _, name := range n.Containers {
		// A window's step container is ours, but no apply may move it.
		if module, ok := steps[name]; ok {
			return &ChangedNetworkError{Name: it.Name, Module: it.Module, Change: it.Reasons[0],
				Why: "the step container " + name + " of a window on module " + module + " is attached to it: apply again once the window has closed"}
		}
		if !ours[name] {
			return &ChangedNetworkError{Name: it.Name, Module: it.Module, Change: it.Reasons[0],
				Why: name + ", which meshctl does not manage here, is attached to it: take it off (docker network disconnect " + it.Name + " " + name + ") and apply again"}
		}
	}
	return nil
}

// replaceNetworks makes again each network whose definition changed. The
// engine changes no network in place. It runs before any container
// changes. This state directory's containers on the network are stopped
// and taken off it. Once it is made again, they join it under the same
// names, and those that ran are started (lifecycle.Executor.ReplaceNetwork).
// The plan then recreates them, health-gated, with the new definition in
// their spec. The containers are unreachable on the network while it is
// replaced.
//
// A failed engine call, or a signal, ends the apply once what the replace
// stopped is put back. A signal makes it an interrupted one.
//
// It runs under the state lock, before the plan's claim is taken. A
// window must never find one of these containers half-done. planNetworks
// refused the change if a window holds one. It also refused it unless all
// the containers are of modules this apply converges. A kill here leaves
// them stopped, some off the network. The next apply of these modules
// recreates them as not running. It first makes the network again if it
// still has the old definition.
func (a *pass) replaceNetworks(ctx context.Context) error {
	x := lifecycle.Executor{Engine: a.eng, Scope: a.scope, Settle: a.opts.Settle}
	for i := range a.netItems {
		it := &a.netItems[i]
		if it.Action != Recreate {
			continue
		}
		a.opts.Progress("replacing network %s (%s)\n", it.Name, strings.Join(it.Reasons, ", "))
		err := x.ReplaceNetwork(ctx, *it.Observed, it.Desired.Internal, a.networkUsers(it.Name))
		if err == nil {
			continue
		}
		a.replaceFailed(it, err)
		if ctx.Err() != nil {
			return fault.New(fault.Interrupted, "%v", err)
		}
		return &FailedError{Err: err}
	}
	return nil
}

// networkUsers are this state directory's containers on the network name,
// in depends-on order.
func (a *pass) networkUsers(name string) []engine.Container {
	byName := map[string]engine.Container{}
	var names []string
	for _, c := range a.windows.Observed {
		if lifecycle.IsService(c, a.scope) && lifecycle.JoinsNetwork(c, name) {
			byName[c.Name] = c
			names = append(names, c.Name)
		}
	}
	deps := map[string][]string{}
	for _, d := range a.desired {
		deps[d.Name] = d.Def.Dependencies(d.Module)
	}
	var users []engine.Container
	for _, n := range lifecycle.DependencyOrder(names, func(n string) []string { return deps[n] }) {
		users = append(users, byName[n])
	}
	return users
}

// replaceFailed writes into the report what a failed replace of it left.
// The network failed, and says what was put back. Each container on it
// says whether it was put back. The plan's other changes were not begun.
func (a *pass) replaceFailed(it *NetItem, err error) {
	it.Action, it.Reasons = Failed, append(it.Reasons, "replace failed: "+engine.Reason(err.Error()))
	re := (*lifecycle.NetworkReplaceError)(nil)
	if errors.As(err, &re) {
		it.Reasons[len(it.Reasons)-1] = "replace failed: " + engine.Reason(re.Err.Error())
		it.Reasons = append(it.Reasons, re.NetworkOutcome())
	}
	a.fillNetworks()
	for i := range a.rep.Containers {
		c := &a.rep.Containers[i]
		user := re != nil && slices.Contains(re.Users, c.Name)
		changes := changesEngine(c.Action)
		switch {
		case user && changes:
			c.Reasons = append(c.Reasons, "not "+doneWord(c.Action, nil))
			c.Action, c.Error = Failed, "network "+it.Name+" could not be replaced; "+re.Outcome(c.Name)
		case user:
			c.Reasons = append(c.Reasons, re.Outcome(c.Name))
		case changes:
			c.Action, c.Error = Failed, "not touched: network "+it.Name+" could not be replaced"
		}
	}
}

// ChangesEngine reports whether carrying out it changes the engine
// (changesEngine).
func (it NetItem) ChangesEngine() bool { return changesEngine(it.Action) }
