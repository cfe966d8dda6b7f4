package enginetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
)

// AddNetwork makes the fake hold a network called name that nobody made
// through it, and returns its ID. It stands for a network meshctl did not
// create.
func (f *Fake) AddNetwork(name string, labels map[string]string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.addNet(name, engine.NetworkSpec{Labels: labels})
}

// NetworkList returns a copy of every network, sorted by name, each with
// the containers attached to it.
func (f *Fake) NetworkList() []engine.Network {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []engine.Network
	for _, n := range f.nets {
		out = append(out, f.netView(n))
	}
	slices.SortFunc(out, func(a, b engine.Network) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// addNet makes a network. One without a subnet gets a range of its own
// from 198.18.0.0/16, as an engine's pool gives one.
func (f *Fake) addNet(name string, spec engine.NetworkSpec) string {
	f.nextID++
	id := fmt.Sprintf("net%03d", f.nextID)
	subnet := spec.Subnet
	if subnet == "" {
		subnet = fmt.Sprintf("198.18.%d.0/24", f.nextID%256)
	}
	f.nets[id] = &engine.Network{ID: id, Name: name, Labels: maps.Clone(spec.Labels), Internal: spec.Internal, Subnets: []string{subnet}}
	f.subnetSet[id] = spec.Subnet != ""
	return id
}

func (f *Fake) findNet(idOrName string) (*engine.Network, error) {
	if n, ok := f.nets[idOrName]; ok {
		return n, nil
	}
	for _, n := range f.nets {
		if n.Name == idOrName {
			return n, nil
		}
	}
	return nil, fmt.Errorf("network %s not found: %w", idOrName, engine.ErrNotFound)
}

// netView is a copy of n with the running containers attached, as the
// engine's inspect lists them. A stopped container has no endpoint.
func (f *Fake) netView(n *engine.Network) engine.Network {
	v := *n
	v.Labels = maps.Clone(n.Labels)
	v.Containers = nil
	for _, c := range f.ctrs {
		if _, ok := c.Spec.Networks[n.Name]; ok && c.Running {
			v.Containers = append(v.Containers, c.Name)
		}
	}
	slices.Sort(v.Containers)
	return v
}

// Networks returns the networks carrying all of labels, without their
// containers.
func (f *Fake) Networks(ctx context.Context, labels map[string]string) ([]engine.Network, error) {
	unlock, err := f.begin(ctx, OpNetworks, "")
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []engine.Network
next:
	for _, n := range f.nets {
		for k, v := range labels {
			if have, ok := n.Labels[k]; !ok || v != "" && have != v {
				continue next
			}
		}
		v := f.netView(n)
		v.Containers = nil
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b engine.Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// InspectNetwork returns the network with its running containers.
func (f *Fake) InspectNetwork(ctx context.Context, idOrName string) (engine.Network, error) {
	unlock, err := f.begin(ctx, OpInspectNet, idOrName)
	if err != nil {
		return engine.Network{}, err
	}
	defer unlock()
	n, err := f.findNet(idOrName)
	if err != nil {
		return engine.Network{}, err
	}
	return f.netView(n), nil
}

// CreateNetwork creates a network. A name in use is refused, as the engine
// does.
func (f *Fake) CreateNetwork(ctx context.Context, name string, spec engine.NetworkSpec) (id string, err error) {
	unlock, err := f.begin(ctx, OpCreateNetwork, name)
	if err != nil {
		return "", err
	}
	defer unlock()
	defer func() { f.record(Event{Op: OpCreateNetwork, Name: name}, err) }()
	if _, err := f.findNet(name); err == nil {
		return "", fmt.Errorf("create network %s: network with name %s already exists", name, name)
	}
	return f.addNet(name, spec), nil
}

// RemoveNetwork removes a network no running container is attached to.
func (f *Fake) RemoveNetwork(ctx context.Context, idOrName string) (err error) {
	unlock, err := f.begin(ctx, OpRemoveNetwork, idOrName)
	if err != nil {
		return err
	}
	defer unlock()
	n, err := f.findNet(idOrName)
	if err != nil {
		return err
	}
	defer func() { f.record(Event{Op: OpRemoveNetwork, Name: n.Name}, err) }()
	if v := f.netView(n); len(v.Containers) > 0 {
		return fmt.Errorf("remove network %s: network has active endpoints", n.Name)
	}
	delete(f.nets, n.ID)
	return nil
}

// ConnectNetwork joins a container to a network.
func (f *Fake) ConnectNetwork(ctx context.Context, net, container string, aliases []string) (err error) {
	unlock, err := f.begin(ctx, OpConnect, container)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(container)
	if err != nil {
		return err
	}
	defer func() { f.record(Event{Op: OpConnect, Name: c.Name, Arg: net}, err) }()
	if _, err := f.findNet(net); err != nil {
		return err
	}
	if _, ok := c.Spec.Networks[net]; ok {
		return fmt.Errorf("connect %s: already attached to network %s", c.Name, net)
	}
	if c.Spec.Networks == nil {
		c.Spec.Networks = map[string][]string{}
	}
	c.Spec.Networks[net] = slices.Clone(aliases)
	return nil
}

// ConnectNetworkAt joins a container to a network without aliases. The
// fake keeps no addresses. It refuses one asked for on a network created
// without a subnet, as an engine does.
func (f *Fake) ConnectNetworkAt(ctx context.Context, net, container, address string) (err error) {
	f.mu.Lock()
	n, nerr := f.findNet(net)
	set := nerr == nil && f.subnetSet[n.ID]
	f.mu.Unlock()
	if address != "" && !set {
		return fmt.Errorf("connect %s: user specified IP address is supported only when connecting to networks with user configured subnets", container)
	}
	return f.ConnectNetwork(ctx, net, container, nil)
}

// DisconnectNetwork takes a container off a network.
func (f *Fake) DisconnectNetwork(ctx context.Context, net, container string) (err error) {
	unlock, err := f.begin(ctx, OpDisconnect, container)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(container)
	if err != nil {
		return err
	}
	defer func() { f.record(Event{Op: OpDisconnect, Name: c.Name, Arg: net}, err) }()
	if _, ok := c.Spec.Networks[net]; !ok {
		return fmt.Errorf("disconnect %s: not attached to network %s: %w", c.Name, net, engine.ErrNotFound)
	}
	delete(c.Spec.Networks, net)
	return nil
}
