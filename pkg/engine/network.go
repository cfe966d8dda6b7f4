package engine

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

func (c *dockerClient) Networks(ctx context.Context, labels map[string]string) ([]Network, error) {
	args := filters.NewArgs()
	for k, v := range labels {
		if v == "" {
			args.Add("label", k)
		} else {
			args.Add("label", k+"="+v)
		}
	}
	var list []network.Summary
	err := c.do(ctx, "list networks", func(ctx context.Context) (err error) {
		list, err = c.api.NetworkList(ctx, network.ListOptions{Filters: args})
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]Network, 0, len(list))
	for _, n := range list {
		out = append(out, Network{ID: n.ID, Name: n.Name, Labels: n.Labels, Internal: n.Internal, Subnets: subnets(n.IPAM)})
	}
	slices.SortFunc(out, func(a, b Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (c *dockerClient) InspectNetwork(ctx context.Context, idOrName string) (Network, error) {
	var r network.Inspect
	err := c.do(ctx, "inspect network "+idOrName, func(ctx context.Context) (err error) {
		r, err = c.api.NetworkInspect(ctx, idOrName, network.InspectOptions{})
		return err
	})
	if err != nil {
		return Network{}, err
	}
	n := Network{ID: r.ID, Name: r.Name, Labels: r.Labels, Internal: r.Internal, Subnets: subnets(r.IPAM)}
	for _, e := range r.Containers {
		n.Containers = append(n.Containers, e.Name)
	}
	slices.Sort(n.Containers)
	return n, nil
}

func (c *dockerClient) CreateNetwork(ctx context.Context, name string, spec NetworkSpec) (string, error) {
	var id string
	err := c.do(ctx, "create network "+name, func(ctx context.Context) error {
		opts := network.CreateOptions{Driver: "bridge", Internal: spec.Internal, Labels: maps.Clone(spec.Labels)}
		if spec.Subnet != "" {
			opts.IPAM = &network.IPAM{Config: []network.IPAMConfig{{Subnet: spec.Subnet}}}
		}
		r, err := c.api.NetworkCreate(ctx, name, opts)
		id = r.ID
		return err
	})
	return id, err
}

func (c *dockerClient) RemoveNetwork(ctx context.Context, idOrName string) error {
	return c.do(ctx, "remove network "+idOrName, func(ctx context.Context) error {
		return c.api.NetworkRemove(ctx, idOrName)
	})
}

// networking returns what a create request says of spec's networks. The first
// in name order is joined at create. The rest are connected before the start.
// An engine older than API 1.44 joins one network at create.
func networking(spec Spec) (first string, cfg *network.NetworkingConfig, rest []string) {
	if len(spec.Networks) == 0 {
		return "", nil, nil
	}
	names := slices.Sorted(maps.Keys(spec.Networks))
	first, rest = names[0], names[1:]
	cfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		first: {Aliases: slices.Clone(spec.Networks[first])}}}
	return first, cfg, rest
}

// connect joins the created container id to the networks rest.
func (c *dockerClient) connect(ctx context.Context, name, id string, spec Spec, rest []string) error {
	for _, n := range rest {
		err := c.do(ctx, fmt.Sprintf("create %s: join network %s", name, n), func(ctx context.Context) error {
			return c.api.NetworkConnect(ctx, n, id, &network.EndpointSettings{Aliases: slices.Clone(spec.Networks[n])})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func subnets(ipam network.IPAM) []string {
	var out []string
	for _, c := range ipam.Config {
		if c.Subnet != "" {
			out = append(out, c.Subnet)
		}
	}
	return out
}

func (c *dockerClient) ConnectNetwork(ctx context.Context, net, container string, aliases []string) error {
	return c.do(ctx, "connect "+container+" to network "+net, func(ctx context.Context) error {
		return c.api.NetworkConnect(ctx, net, container, &network.EndpointSettings{Aliases: slices.Clone(aliases)})
	})
}

func (c *dockerClient) ConnectNetworkAt(ctx context.Context, net, container, address string) error {
	return c.do(ctx, "connect "+container+" to network "+net+" at "+address, func(ctx context.Context) error {
		return c.api.NetworkConnect(ctx, net, container, &network.EndpointSettings{
			IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: address}})
	})
}

func (c *dockerClient) DisconnectNetwork(ctx context.Context, net, container string) error {
	return c.do(ctx, "disconnect "+container+" from network "+net, func(ctx context.Context) error {
		err := c.api.NetworkDisconnect(ctx, net, container, true)
		// An engine answers 500 for a container that is not on the network.
		// It says the same after a forced disconnect of a network that is
		// gone. Here that is a not-found error. The container is off the
		// network already, as after a disconnect whose answer was lost.
		if err != nil && strings.Contains(err.Error(), "is not connected to the network") {
			return notFoundError{err}
		}
		return err
	})
}
