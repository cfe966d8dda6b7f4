package lifecycle

import (
	"context"
	"fmt"
	"maps"
	"slices"

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
		if _, err := x.Engine.CreateNetwork(ctx, name, NetworkSpec(x.Scope, module, net, nets[name].Internal)); err != nil {
			// Another create of the same network, at the same time, won.
			if _, ierr := x.Engine.InspectNetwork(ctx, name); ierr == nil {
				continue
			}
			return err
		}
	}
	return nil
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
