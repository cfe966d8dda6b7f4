package apply

import (
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/record"
)

// Action is what a plan does to a container or a network (CONTRACT §5).
// It is the report's type, so an item's action becomes its report line's.
type Action = record.Action

// Actions a plan gives a container (CONTRACT §5).
const (
	Create    Action = "create"
	Unchanged Action = "unchanged"
	Recreate  Action = "recreate"
	Held      Action = "held"
	Deferred  Action = "deferred"
	Orphan    Action = "orphan"
	Remove    Action = "remove"
	Conflict  Action = "conflict"
	// Failed is what an action becomes when carrying it out failed.
	Failed Action = "failed"
	// Released is an unchanged container that this apply started again by
	// releasing a dead window's hold. The plan, made after the release,
	// finds it running as wanted.
	Released Action = "released"
)

// ConflictReason says why name cannot be created. Either a container
// meshctl does not manage has it (owner ""), or one of another state
// directory does (owner is its ID). In that case the operator most likely
// meant to point at that directory.
func ConflictReason(name, owner string) string {
	if owner != "" {
		return name + " is managed by another meshctl state directory (id " + owner + "); check --state-dir, or rename the container"
	}
	return "a container meshctl does not manage is named " + name + "; rename or remove it"
}

// ReasonNotRunning is the reason for recreating a stopped container that no
// window holds. On this host, stopped means broken.
const ReasonNotRunning = "not running"

// ReasonRestarting is the reason for recreating a restarting container
// (engine.StateOf). It crashed, and the engine's "running" says nothing of
// its health.
const ReasonRestarting = "restarting"

// HoldRef says which live window holds a container.
type HoldRef struct {
	Window string
	// Changed says the window holds the container changed. Its copy runs
	// under the name, and the normal one waits aside (lifecycle.HeldName).
	Changed bool
}

// Item is the plan for one container.
type Item struct {
	Name      string
	Module    string
	Container string
	Action    Action
	Reasons   []string
	Window    string
	Desired   *lifecycle.Desired // nil for orphans
	Observed  *engine.Container  // nil when missing
	// Waits are the held containers a deferred change waits for. It is the
	// container itself, or the held ones it depends on. The close of their
	// window carries the change out.
	Waits []string
}

// Input is everything the planner decides from.
type Input struct {
	Desired []lifecycle.Desired
	// Observed are the containers the engine reports with meshctl's labels.
	Observed []engine.Container
	// Holds maps engine names to the live window that holds them.
	Holds map[string]HoldRef
	// Scope is the state directory's ID (LabelManaged).
	Scope string
	// Taken are names held by containers outside this scope. Each maps to
	// "" if meshctl does not manage it, or to the ID of the state directory
	// that does.
	Taken map[string]string
	Prune bool
	// Modules are the modules this apply owns, the file's and those it
	// removes. A managed container of another module is left alone and
	// not planned at all. Nil owns every module.
	Modules map[string]bool
	// Remove are the modules removed whole (--remove-module). Their
	// containers are removed, with or without Prune.
	Remove map[string]bool
	// Now is when Observed was listed, for engine.StateOf.
	Now time.Time
	// Encoded are the specs of Desired encoded (mesh.Spec.Encode), in the
	// same order, made while the engine answered the list. Nil, or of
	// another length, has the plan encode them.
	Encoded []string
}

// Plan returns one item per desired or managed container, in name order.
// It is a pure function of its input. Every rule for what apply does to a
// container is here.
func Plan(in Input) []Item {
	// Sized first: at 1000 containers, growing these was a fifth of what
	// a no-op plan allocated.
	observed := make(map[string]*engine.Container, len(in.Observed))
	for i := range in.Observed {
		c := &in.Observed[i]
		if lifecycle.IsService(*c, in.Scope) {
			observed[c.Name] = c
		}
	}
	var items []Item
	if len(in.Desired) > 0 {
		items = make([]Item, 0, len(in.Desired))
	}
	wanted := make(map[string]bool, len(in.Desired))
	encoded := in.Encoded
	if len(encoded) != len(in.Desired) {
		encoded = EncodeSpecs(in.Desired)
	}
	for i := range in.Desired {
		d := &in.Desired[i]
		wanted[d.Name] = true
		items = append(items, planOne(d, encoded[i], observed[d.Name], in))
	}
	deferDependents(items, in.Holds)
	for name, c := range observed {
		module := c.Labels[lifecycle.LabelModule]
		if wanted[name] || in.Modules != nil && !in.Modules[module] {
			continue
		}
		if _, aside := lifecycle.HeldOf(name); aside {
			// The normal container of a changed hold, aside while its window
			// runs a changed copy under the name. It is part of that hold, or
			// the heal puts it back once no hold records it. Never an orphan.
			continue
		}
		if strings.HasSuffix(name, lifecycle.NewName("")) && wanted[strings.TrimSuffix(name, lifecycle.NewName(""))] {
			// A replacement under its temporary name that the heal did not
			// see. An apply that died sent its create, and the engine carried
			// it out after the heal's listing. It is not an orphan. The
			// recreate of its name removes it (createNew), else the next heal
			// does.
			continue
		}
		it := Item{Name: name, Module: module, Container: c.Labels[lifecycle.LabelContainer], Observed: c}
		switch hold, held := in.Holds[name]; {
		case held:
			it.Action, it.Window = Held, hold.Window
			it.Reasons = []string{"held by window " + hold.Window + "; no longer in the mesh file"}
		default:
			it.Action, it.Reasons = unlisted(module, in.Remove[module], in.Prune)
		}
		items = append(items, it)
	}
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	return items
}

// unlisted is what becomes of a container or network of module that the
// mesh file no longer names. It is removed with its module (removed) or by
// --prune (prune). Else it is an orphan, and reported.
func unlisted(module string, removed, prune bool) (Action, []string) {
	switch {
	case removed:
		return Remove, []string{"module " + module + " removed"}
	case prune:
		return Remove, []string{"not in the mesh file"}
	}
	return Orphan, []string{"not in the mesh file; --prune removes it"}
}

// EncodeSpecs returns the specs of desired encoded (mesh.Spec.Encode), in
// their order: Input.Encoded.
func EncodeSpecs(desired []lifecycle.Desired) []string {
	out := make([]string, len(desired))
	for i := range desired {
		out[i] = desired[i].Spec.Encode()
	}
	return out
}

// planOne is the plan for desired container d, whose spec encodes as
// encoded, and which the engine has as c. A nil c is missing.
func planOne(d *lifecycle.Desired, encoded string, c *engine.Container, in Input) Item {
	it := Item{Name: d.Name, Module: d.Module, Container: d.Container, Desired: d, Observed: c}
	if owner, taken := in.Taken[d.Name]; c == nil && taken {
		it.Action = Conflict
		it.Reasons = []string{ConflictReason(d.Name, owner)}
		return it
	}
	diff := drift(d, encoded, c)
	if hold, held := in.Holds[d.Name]; held {
		if hold.Changed {
			// The copy under the name is the window's. The file's wish is for
			// the normal one aside, which the close brings back.
			c = in.observedAside(d.Name)
			diff = drift(d, encoded, c)
		}
		it.Window = hold.Window
		it.Action, it.Reasons = heldAction(hold, c, diff)
		if it.Action == Deferred {
			it.Waits = []string{d.Name}
		}
		return it
	}
	switch why := mustRecreate(c, diff, in.Now); {
	case c == nil:
		it.Action = Create
	case len(why) > 0:
		it.Action, it.Reasons = Recreate, why
	default:
		it.Action = Unchanged
	}
	return it
}

// drift says how c differs from d. It compares the recorded spec, and for
// `pull: always` the image its tag names now. A missing container has none.
func drift(d *lifecycle.Desired, encoded string, c *engine.Container) []string {
	if c == nil {
		return nil
	}
	return lifecycle.DiffEncoded(*c, d, encoded)
}

// heldAction is the rule for a container a live window holds. Such a
// container is never touched. If it is missing or differs from what the
// file wants (diff), the change is deferred until the window's close,
// which carries it out. Else it stays held.
func heldAction(hold HoldRef, c *engine.Container, diff []string) (Action, []string) {
	by := "held by window " + hold.Window
	if hold.Changed {
		by = "held changed by window " + hold.Window
	}
	switch {
	case c == nil:
		return Deferred, []string{by, "missing: created when the window closes"}
	case len(diff) > 0:
		return Deferred, append([]string{by}, diff...)
	default:
		return Held, []string{by}
	}
}

// observedAside is the normal container a changed hold of name set
// aside, nil when there is none.
func (in Input) observedAside(name string) *engine.Container {
	for i := range in.Observed {
		if c := &in.Observed[i]; c.Name == lifecycle.HeldName(name) && lifecycle.IsService(*c, in.Scope) {
			return c
		}
	}
	return nil
}

// deferDependents defers the create or recreate of a container that
// depends on a held one. What it depends on is stopped, so its gate would
// prove nothing. The close of the holding window carries the change out,
// once the held one is back. A dependency whose own change is deferred
// defers its dependents too, in depends-on order. holds names the held
// containers of every module, planned here or not.
func deferDependents(items []Item, holds map[string]HoldRef) {
	byName := map[string]*Item{}
	names := make([]string, 0, len(items))
	for i := range items {
		byName[items[i].Name] = &items[i]
		names = append(names, items[i].Name)
	}
	deps := func(name string) []string {
		if d := byName[name].Desired; d != nil {
			return d.Def.Dependencies(d.Module)
		}
		return nil
	}
	for _, name := range lifecycle.DependencyOrder(names, deps) {
		it := byName[name]
		if it.Action != Create && it.Action != Recreate {
			continue
		}
		for _, dep := range deps(name) {
			if why, window, waits := waitingOn(dep, byName[dep], holds); window != "" {
				it.Action, it.Window, it.Waits = Deferred, window, waits
				it.Reasons = append([]string{why}, it.Reasons...)
				break
			}
		}
	}
}

// waitingOn says whether dependency dep, planned as it (nil when not
// planned here), is held or has its change deferred. It returns the reason,
// the holding window and the held containers to wait for. An empty window
// means dep is not waited on.
func waitingOn(dep string, it *Item, holds map[string]HoldRef) (why, window string, waits []string) {
	switch {
	case it != nil && it.Action == Deferred:
		return "depends on " + dep + ", whose change waits for window " + it.Window + " to close", it.Window, it.Waits
	case it != nil && it.Action != Held:
		return "", "", nil
	}
	if h, held := holds[dep]; held {
		return "depends on " + dep + ", held by window " + h.Window, h.Window, []string{dep}
	}
	return "", "", nil
}

// mustRecreate is the rule for replacing a container no window holds. It
// returns why c must be replaced, or none when it need not be. It must be
// when it differs from what the file wants (diff), or when it does not
// run. On this host, stopped means broken, and so does restarting, a crash
// loop. engine.StateOf says which state it is in at time now.
func mustRecreate(c *engine.Container, diff []string, now time.Time) []string {
	if c == nil {
		return nil
	}
	if len(diff) > 0 {
		return diff
	}
	switch engine.StateOf(*c, now) {
	case engine.Stopped:
		return []string{ReasonNotRunning}
	case engine.Restarting:
		return []string{ReasonRestarting}
	default:
		return nil
	}
}

// ChangesEngine reports whether carrying out it changes the engine
// (changesEngine).
func (it Item) ChangesEngine() bool { return changesEngine(it.Action) }

// changesEngine is the one rule for what changes the engine. Only a
// create, a recreate or a removal does, of a container or a network. Every
// other action leaves the engine as it is. This is what a claim covers,
// what execute carries out, and what makes a report "changed".
func changesEngine(action Action) bool {
	return action == Create || action == Recreate || action == Remove
}

// Changes reports whether carrying out items and the network plan nets
// would change the engine.
func Changes(items []Item, nets []NetItem) bool {
	return slices.ContainsFunc(items, Item.ChangesEngine) || slices.ContainsFunc(nets, NetItem.ChangesEngine)
}
