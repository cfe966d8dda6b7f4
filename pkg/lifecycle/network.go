package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// LabelNetwork is, on a network meshctl created, its name in its module.
// Such a network has LabelManaged and LabelModule too, as a container has.
const LabelNetwork = mesh.LabelPrefix + "network"

// NetworkSpec is what the engine needs to create the module network net.
// Its labels say that the state directory whose ID is scope manages it.
func NetworkSpec(scope, module, net string, internal bool) engine.NetworkSpec {
	return engine.NetworkSpec{Internal: internal, Labels: map[string]string{
		LabelManaged: scope, LabelModule: module, LabelNetwork: net}}
}

// IsOwnNetwork reports whether n is a network the state directory whose ID
// is scope created.
func IsOwnNetwork(n engine.Network, scope string) bool {
	return n.Labels[LabelManaged] == scope && n.Labels[LabelNetwork] != ""
}

// networkAliases are the names a container answers to on each of its
// networks. The first is its short name, its key in its module. Then come
// its engine name (MODULE.NAME) and its aliases.
func (d Desired) networkAliases() map[string][]string {
	if len(d.Spec.Networks) == 0 {
		return nil
	}
	out := make(map[string][]string, len(d.Spec.Networks))
	for name, n := range d.Spec.Networks {
		aliases := []string{d.Container, d.Name}
		for _, a := range n.Aliases {
			if !slices.Contains(aliases, a) {
				aliases = append(aliases, a)
			}
		}
		out[name] = aliases
	}
	return out
}

// EnsureNetworks creates the networks of a container that the engine
// lacks. Nets holds them by engine name. It creates only those meshctl
// names, a module's "meshctl.MODULE.NET", labelled as this state
// directory's. It runs before the container is created or started again.
// A window's close may bring back a container whose network was removed
// meanwhile. So may the release of a dead window's hold. A missing external
// network is an error, since meshctl never creates one.
func (x Executor) EnsureNetworks(ctx context.Context, nets map[string]mesh.SpecNetwork) error {
	for _, name := range slices.Sorted(maps.Keys(nets)) {
		_, err := x.Engine.InspectNetwork(ctx, name)
		if err == nil {
			continue
		}
		if !engine.IsNotFound(err) {
			return err
		}
		module, net, ok := mesh.NetworkOwner(name)
		if !ok {
			return &MissingNetworkError{Name: name}
		}
		if _, err := x.CreateNetwork(ctx, name, NetworkSpec(x.Scope, module, net, nets[name].Internal)); err != nil {
			// Another create of the same network, at the same time, won.
			if _, ierr := x.Engine.InspectNetwork(ctx, name); ierr == nil {
				continue
			}
			return err
		}
	}
	return nil
}

// CreateNetwork creates the module network name. A network made without
// a configured subnet refuses an address asked for (IsAddressRefused). Yet
// a start-first recreate has the old container rejoin at its address, so
// connections in flight still reach it (leaveAliases). So a spec without
// a subnet gets the engine's own pick kept. The network is made, its
// range read, and it is made again with that range, configured. A call
// that fails past the first create leaves a network without one: it
// works, and a rejoin then takes a new address.
func (x Executor) CreateNetwork(ctx context.Context, name string, spec engine.NetworkSpec) (string, error) {
	id, err := x.Engine.CreateNetwork(ctx, name, spec)
	if err != nil || spec.Subnet != "" {
		return id, err
	}
	n, err := x.Engine.InspectNetwork(ctx, id)
	if spec.Subnet = ipv4Subnet(n.Subnets); err != nil || spec.Subnet == "" || len(n.Containers) > 0 {
		return id, nil
	}
	if err := x.Engine.RemoveNetwork(ctx, id); err != nil {
		// Its answer may be lost, the network gone all the same.
		if _, ierr := x.Engine.InspectNetwork(ctx, id); ierr == nil || !engine.IsNotFound(ierr) {
			return id, nil
		}
	}
	if id, err = x.Engine.CreateNetwork(ctx, name, spec); err == nil {
		return id, nil
	}
	// Another create of the name may have won meanwhile. Else the range
	// was taken: the engine picks again.
	if n, ierr := x.Engine.InspectNetwork(ctx, name); ierr == nil {
		return n.ID, nil
	}
	spec.Subnet = ""
	return x.Engine.CreateNetwork(ctx, name, spec)
}

// ipv4Subnet returns the first IPv4 range of subnets, or "".
func ipv4Subnet(subnets []string) string {
	for _, s := range subnets {
		if strings.Contains(s, ".") {
			return s
		}
	}
	return ""
}

// MissingNetworkError is an external network that does not exist.
type MissingNetworkError struct{ Name string }

func (e *MissingNetworkError) Error() string {
	return fmt.Sprintf("network %s does not exist: it is external, and meshctl never creates one; create it (docker network create %s) or drop it from the mesh file", e.Name, e.Name)
}

// RecordedNetworks are the networks c was created to join, from its
// recorded spec.
func RecordedNetworks(c engine.Container) map[string]mesh.SpecNetwork {
	s, err := mesh.DecodeSpec(c.Labels[LabelSpec])
	if err != nil {
		return nil
	}
	return s.Networks
}

// JoinsNetwork reports whether c was created to join the network name.
func JoinsNetwork(c engine.Container, name string) bool {
	_, ok := RecordedNetworks(c)[name]
	return ok
}

// RecordedAliases are the names c answers to on the network name, from
// its recorded spec. They are its name in its module, its engine name,
// then its aliases.
func RecordedAliases(c engine.Container, name string) []string {
	aliases := []string{c.Labels[LabelContainer], c.Name}
	for _, a := range RecordedNetworks(c)[name].Aliases {
		if !slices.Contains(aliases, a) {
			aliases = append(aliases, a)
		}
	}
	return slices.DeleteFunc(aliases, func(a string) bool { return a == "" })
}

// ReplaceNetwork makes the network old again, with internal as its
// definition. The engine changes no network in place. Users are this
// state directory's containers on it, in depends-on order. They are
// stopped, last first, and taken off it. Once it is made again, each joins
// it under its recorded aliases, and each that ran is started. A failed
// engine call, or a signal, puts back what it stopped (putBackNetwork). The
// error is then a *NetworkReplaceError.
func (x Executor) ReplaceNetwork(ctx context.Context, old engine.Network, internal bool, users []engine.Container) error {
	err := x.replaceNetwork(ctx, old, internal, users)
	if err == nil {
		return nil
	}
	return x.putBackNetwork(ctx, old, users, err)
}

// replaceNetwork carries out ReplaceNetwork, up to the first call that fails.
func (x Executor) replaceNetwork(ctx context.Context, old engine.Network, internal bool, users []engine.Container) error {
	for _, c := range slices.Backward(users) {
		if c.Running {
			// Seen through after a signal too, so that the put-back finds
			// it stopped, not stopping.
			if err := StopThrough(ctx, x.Engine, c.ID, StopTimeoutOf(c)); err != nil {
				return fmt.Errorf("stop %s: %w", c.Name, err)
			}
		}
		if err := x.Engine.DisconnectNetwork(ctx, old.Name, c.ID); err != nil && !engine.IsNotFound(err) {
			return fmt.Errorf("take %s off it: %w", c.Name, err)
		}
	}
	if err := x.Engine.RemoveNetwork(ctx, old.ID); err != nil {
		return fmt.Errorf("remove the old one: %w", err)
	}
	spec := NetworkSpec(x.Scope, old.Labels[LabelModule], old.Labels[LabelNetwork], internal)
	// The old one's range, so each container keeps its address.
	spec.Subnet = ipv4Subnet(old.Subnets)
	if _, err := x.CreateNetwork(ctx, old.Name, spec); err != nil {
		return fmt.Errorf("create the new one: %w", err)
	}
	for _, c := range users {
		if err := x.Engine.ConnectNetwork(ctx, old.Name, c.ID, RecordedAliases(c, old.Name)); err != nil {
			return fmt.Errorf("connect %s: %w", c.Name, err)
		}
		if c.Running {
			if err := x.Start(ctx, c); err != nil {
				return fmt.Errorf("start %s: %w", c.Name, err)
			}
		}
	}
	return nil
}

// putBackNetwork puts back what a replace of the network old stopped. The
// replace failed with err, or a signal cut it short. It asks the engine
// what exists before it acts, each step with a fresh bounded context. The
// network is the new one if the engine has it. Else the old one is there
// still, or made again as it was. Each of users joins it again under its
// recorded aliases. Each that ran is started if stopped, and gated
// (WaitHealthy), in the order given. The network's lookup, and each
// container's lookup and start, are made again if they fail (askAgain).
func (x Executor) putBackNetwork(ctx context.Context, old engine.Network, users []engine.Container, err error) error {
	e := &NetworkReplaceError{Name: old.Name, Err: err, Was: old.Internal, Ran: map[string]bool{}, Left: map[string]error{}}
	for _, c := range users {
		e.Users = append(e.Users, c.Name)
		e.Ran[c.Name] = c.Running
	}
	n := old
	nerr := askAgain(ctx, func(ctx context.Context) (err error) {
		if err := x.EnsureNetworks(ctx, map[string]mesh.SpecNetwork{old.Name: {Internal: old.Internal}}); err != nil {
			return err
		}
		n, err = x.Engine.InspectNetwork(ctx, old.Name)
		return err
	})
	if nerr != nil {
		e.NetErr = nerr
		return e
	}
	e.Internal = n.Internal
	for _, c := range users {
		if perr := x.putBackOn(CleanupContext(ctx), n, c); perr != nil {
			e.Left[c.Name] = perr
		}
	}
	return e
}

// putBackOn puts container c back on the network n, as a replace that
// failed found it. The engine lists c on n only while c runs there. If it
// does not, c leaves n and joins it again. A connect whose answer was lost
// may have joined it already. If c ran, it is started unless it runs, and
// gated. Its lookup and its start are tried again if they fail (askAgain).
func (x Executor) putBackOn(ctx context.Context, n engine.Network, c engine.Container) error {
	var cur engine.Container
	err := askAgain(ctx, func(ctx context.Context) (err error) {
		cur, err = x.Engine.Inspect(ctx, c.ID)
		return err
	})
	if err != nil {
		return fmt.Errorf("look it up: %w", err)
	}
	if !cur.Running || !slices.Contains(n.Containers, c.Name) {
		if err := x.Engine.DisconnectNetwork(ctx, n.Name, c.ID); err != nil && !engine.IsNotFound(err) {
			return fmt.Errorf("take it off the network to connect it again: %w", err)
		}
		if err := x.Engine.ConnectNetwork(ctx, n.Name, c.ID, RecordedAliases(c, n.Name)); err != nil {
			return fmt.Errorf("connect it: %w", err)
		}
	}
	if !c.Running {
		return nil
	}
	if !cur.Running {
		if err := askAgain(ctx, func(ctx context.Context) error { return x.Start(ctx, c) }); err != nil {
			return fmt.Errorf("start it: %w", err)
		}
	}
	_, err = x.WaitHealthy(ctx, c.ID, c.Name)
	return err
}

// NetworkReplaceError is a replace of network Name that failed (Err), or
// that a signal cut short. What it stopped was put back (putBackNetwork).
// Internal is the network's definition once put back, and Was the old one.
// NetErr says why no network could be had. Then nothing was put back. Left
// holds, by name, each of Users the put-back could not bring back. Ran
// says which of them ran.
type NetworkReplaceError struct {
	Name          string
	Err           error
	Internal, Was bool
	NetErr        error
	Users         []string
	Ran           map[string]bool
	Left          map[string]error
}

func (e *NetworkReplaceError) Error() string {
	msg := fmt.Sprintf("replace network %s: %v; %s", e.Name, e.Err, e.NetworkOutcome())
	if e.NetErr != nil {
		return msg
	}
	for _, name := range e.Users {
		if e.Left[name] != nil {
			msg += "; " + name + ": " + e.Outcome(name)
		}
	}
	return msg
}

// NetworkOutcome says what became of the network.
func (e *NetworkReplaceError) NetworkOutcome() string {
	switch {
	case e.NetErr != nil:
		return fmt.Sprintf("not put back: %v; its containers stay stopped, and the next apply recreates them", e.NetErr)
	case e.Internal == e.Was:
		return fmt.Sprintf("put back as it was (internal: %v), its containers on it", e.Internal)
	}
	return fmt.Sprintf("the new one kept (internal: %v), its containers put back on it", e.Internal)
}

// Outcome says what became of the container name, one of Users.
func (e *NetworkReplaceError) Outcome(name string) string {
	err := e.Left[name]
	he := (*HealthError)(nil)
	switch {
	case e.NetErr != nil:
		return "not put back: the network could not be had; it stays stopped, and the next apply recreates it"
	case errors.As(err, &he):
		return fmt.Sprintf("put back and started, but %s; the next apply tries again", he.Reason)
	case err != nil:
		return fmt.Sprintf("not put back: %v; the next apply recreates it", err)
	case e.Ran[name]:
		return "put back, running on the network again"
	}
	return "put back on the network, stopped as it was"
}
