package mesh

import (
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/meshctl/meshctl/pkg/lazyre"
)

// Network is one of a module's networks. meshctl creates it, labels it and
// removes it with the module. Its engine name is NetworkName. An external one
// names a network that exists already. meshctl joins it but never creates or
// removes it.
type Network struct {
	// Internal cuts the network off from the outside. Its containers reach
	// only each other.
	Internal bool `yaml:"internal,omitempty" json:"internal,omitempty"`
	// External is the engine name of an existing network to join instead.
	External string `yaml:"external,omitempty" json:"external,omitempty"`
}

// NetworkJoin is how a container joins one network. It joins under its short
// name, its engine name and these aliases.
type NetworkJoin struct {
	Aliases []string `yaml:"aliases,omitempty" json:"aliases,omitempty"`
}

// ContainerNetworks are the networks a container joins. Each is named as its
// module names it ("NET"), or as another module does ("MODULE/NET"). The file
// gives them as a list of names or as a map of name to {aliases: […]}.
type ContainerNetworks map[string]*NetworkJoin

// UnmarshalYAML reads networks as a list of names or a map.
func (n *ContainerNetworks) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind == yaml.AliasNode && node.Alias != nil {
		node = node.Alias
	}
	switch node.Kind {
	case yaml.MappingNode:
		return n.fromMap(node)
	case yaml.SequenceNode:
		m := ContainerNetworks{}
		var errs []string
		for i, item := range node.Content {
			switch {
			case item.Kind != yaml.ScalarNode:
				errs = append(errs, nodeError(item, "networks item %d: want a network name, or write networks as a map NAME: {aliases: […]}", i))
			case m[item.Value] != nil:
				errs = append(errs, nodeError(item, "networks item %d: %q is listed twice", i, item.Value))
			default:
				m[item.Value] = &NetworkJoin{}
			}
		}
		if len(errs) > 0 {
			return &yaml.TypeError{Errors: errs}
		}
		*n = m
		return nil
	}
	return &yaml.TypeError{Errors: []string{nodeError(node, "networks: want a list of network names or a map NAME: {aliases: […]}")}}
}

// fromMap reads networks in map form, as strictly as the rest of the file. A
// node's own Decode would take an unknown field silently.
func (n *ContainerNetworks) fromMap(node *yaml.Node) error {
	m := ContainerNetworks{}
	var errs []string
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, v := node.Content[i], node.Content[i+1]
		if v.Kind == yaml.AliasNode && v.Alias != nil {
			v = v.Alias
		}
		join := &NetworkJoin{}
		switch {
		case m[k.Value] != nil:
			errs = append(errs, nodeError(k, "networks: %q is listed twice", k.Value))
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!null":
		case v.Kind != yaml.MappingNode:
			errs = append(errs, nodeError(v, "networks.%s: want {aliases: […]} or nothing", k.Value))
		default:
			for j := 0; j+1 < len(v.Content); j += 2 {
				field := v.Content[j]
				if field.Value != "aliases" {
					errs = append(errs, nodeError(field, "field %s not found in type mesh.NetworkJoin", field.Value))
					continue
				}
				if err := v.Content[j+1].Decode(&join.Aliases); err != nil {
					errs = append(errs, nodeError(v.Content[j+1], "networks.%s.aliases: want a list of names", k.Value))
				}
			}
		}
		m[k.Value] = join
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	*n = m
	return nil
}

// NetworkName is the engine name of a module's network, "meshctl.MODULE.NET".
// Neither name holds a '.', so it names one network of one module. The prefix
// keeps it apart from people's networks and those of Compose projects
// ("PROJECT_default").
func NetworkName(module, net string) string { return "meshctl." + module + "." + net }

// NetworkNames returns the module's network names in order.
func (m *Module) NetworkNames() []string { return sortedKeys(m.Networks) }

// SpecNetwork is how a container joins a network, in its canonical spec. It
// holds the aliases, sorted, and whether the network is internal. So a
// changed definition recreates the container with the network.
type SpecNetwork struct {
	Aliases  []string `json:"aliases,omitempty"`
	Internal bool     `json:"internal,omitempty"`
}

// SpecNetworks returns the networks the container cn of module mn joins, by
// engine name, in canonical form. It returns nil when the container joins
// none. A network of a module the file does not hold ("other/net") is taken
// as it is. That module was applied from another file.
func (f *File) SpecNetworks(mn, cn string) map[string]SpecNetwork {
	m := f.Modules[mn]
	c := m.Containers[cn]
	if len(c.Networks) == 0 {
		return nil
	}
	out := make(map[string]SpecNetwork, len(c.Networks))
	for ref, join := range c.Networks {
		name, def := f.resolveNetwork(mn, ref)
		var s SpecNetwork
		if join != nil {
			s.Aliases = sortedOrNil(join.Aliases)
		}
		if def != nil {
			s.Internal = def.Internal
		}
		out[name] = s
	}
	return out
}

// resolveNetwork returns the engine name of the network ref that a
// container of module mn names, and its definition when the file holds it.
func (f *File) resolveNetwork(mn, ref string) (string, *Network) {
	owner, net, other := strings.Cut(ref, "/")
	if !other {
		owner, net = mn, ref
	}
	if m := f.Modules[owner]; m != nil {
		if def := m.Networks[net]; def != nil {
			if def.External != "" {
				return def.External, def
			}
			return NetworkName(owner, net), def
		}
	}
	return NetworkName(owner, net), nil
}

// DesiredNetwork is a network meshctl creates for a module.
type DesiredNetwork struct {
	Name     string // engine name
	Module   string
	Net      string // its name in the module
	Internal bool
}

// DesiredNetworks returns the networks meshctl creates for f's modules, by
// engine name in order. External ones are not among them.
func (f *File) DesiredNetworks() []DesiredNetwork {
	var out []DesiredNetwork
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		for _, nn := range m.NetworkNames() {
			def := m.Networks[nn]
			if def != nil && def.External != "" {
				continue
			}
			d := DesiredNetwork{Name: NetworkName(mn, nn), Module: mn, Net: nn}
			if def != nil {
				d.Internal = def.Internal
			}
			out = append(out, d)
		}
	}
	return out
}

// engineNetworkRE is what an external network's name may be. It is the
// engine's own rule for names.
var engineNetworkRE = lazyre.New(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// networks checks module mn's networks. p is the module's path.
func (v *validator) networks(p []string, m *Module) {
	for _, nn := range m.NetworkNames() {
		np := append(append([]string{}, p...), "networks", nn)
		v.name(np, "network", nn)
		def := m.Networks[nn]
		if def == nil {
			continue // {} and null alike: a network with the defaults
		}
		switch {
		case def.External != "" && !engineNetworkRE().MatchString(def.External):
			v.fail(append(np, "external"), "%q is not a network name: letters, digits, '_', '.' and '-'", def.External)
		case def.External != "" && def.Internal:
			v.fail(append(np, "internal"), "an external network is not created by meshctl: internal is its creator's to set; drop internal or external")
		}
	}
}

// containerNetworks checks the networks container c of module mn joins.
func (v *validator) containerNetworks(f *File, mn string, p []string, c *Container) {
	if len(c.Networks) == 0 {
		return
	}
	at := append(append([]string{}, p...), "networks")
	if c.Network != "" {
		v.fail(at, "cannot combine with network: %s (networks joins the container to networks of its module; "+
			"network sets the engine's network mode): drop one of them", c.Network)
		return
	}
	for _, ref := range sortedKeys(c.Networks) {
		rp := append(append([]string{}, at...), ref)
		owner, net, other := strings.Cut(ref, "/")
		switch {
		case other && (!ValidName(owner) || !ValidName(net)):
			v.fail(rp, "%q is not a network: write NET (this module's) or MODULE/NET (another module's)", ref)
			continue
		case other && owner == mn:
			v.fail(rp, "%q is this module's own network: write %s", ref, net)
			continue
		case other:
			if om := f.Modules[owner]; om != nil && !hasKey(om.Networks, net) && !v.undecoded("modules", owner, "networks", net) {
				v.fail(rp, "module %s has no network %q (it has: %s)", owner, net, networkList(om))
				continue
			}
		default:
			if !hasKey(f.Modules[mn].Networks, ref) && !v.undecoded("modules", mn, "networks", ref) {
				v.fail(rp, "unknown network %q: declare it under modules.%s.networks (this module has: %s)", ref, mn, networkList(f.Modules[mn]))
				continue
			}
		}
		join := c.Networks[ref]
		if join == nil {
			continue
		}
		for i, a := range join.Aliases {
			if len(a) > 253 || !hostnameRE().MatchString(a) {
				v.fail(append(rp, "aliases", index(i)), "%q is not a host name: letters, digits, '-' and '.'", a)
			} else if slices.Index(join.Aliases, a) < i {
				v.fail(append(rp, "aliases", index(i)), "%q listed twice", a)
			}
		}
	}
}

// networkList writes a module's network names, "none" when it has none.
func networkList(m *Module) string {
	if len(m.Networks) == 0 {
		return "none"
	}
	return strings.Join(m.NetworkNames(), ", ")
}

// NetworkOwner returns the module and network name of an engine network that
// meshctl names (NetworkName). ok is false for any other name.
func NetworkOwner(name string) (module, net string, ok bool) {
	rest, ok := strings.CutPrefix(name, "meshctl.")
	if !ok {
		return "", "", false
	}
	module, net, ok = strings.Cut(rest, ".")
	if !ok || !ValidName(module) || !ValidName(net) {
		return "", "", false
	}
	return module, net, true
}

// normNetworks sorts each network's aliases. It returns nil for none.
func normNetworks(n map[string]SpecNetwork) map[string]SpecNetwork {
	if len(n) == 0 {
		return nil
	}
	out := make(map[string]SpecNetwork, len(n))
	for k, s := range n {
		s.Aliases = sortedOrNil(s.Aliases)
		out[k] = s
	}
	return out
}

// diffNetworks names each network joined, left, or joined otherwise, as
// "networks.NAME". Joined otherwise means with other aliases, or with
// internal changed.
func diffNetworks(have, want map[string]SpecNetwork) []string {
	var d []string
	for _, k := range sortedKeys(want) {
		h, ok := have[k]
		if w := want[k]; !ok || h.Internal != w.Internal || !slices.Equal(h.Aliases, w.Aliases) {
			d = append(d, "networks."+k)
		}
	}
	for _, k := range sortedKeys(have) {
		if _, ok := want[k]; !ok {
			d = append(d, "networks."+k)
		}
	}
	return d
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// MarshalYAML writes networks as a list of names when none has aliases. A
// file would most often say it so.
func (n ContainerNetworks) MarshalYAML() (any, error) {
	for _, j := range n {
		if j != nil && len(j.Aliases) > 0 {
			return map[string]*NetworkJoin(n), nil
		}
	}
	return sortedKeys(n), nil
}
