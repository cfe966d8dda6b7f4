package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// Keys of Compose's networks that a mesh file carries. A network carries
// external, internal, driver (bridge) and the name of an external one. A
// service carries its aliases on a network.
var (
	topNetKeys     = set("name", "external", "internal", "driver")
	serviceNetKeys = set("aliases")
)

// networkSteps are the next steps of the networks' keys meshctl has no
// field for (see nextSteps).
var networkSteps = map[string]string{
	// A network's key has no SERVICE or CONTAINER to name (notCarried).
	"ipam": "meshctl takes a network's addresses from the engine's pool: remove ipam, and reach its containers " +
		"by their service names",
	"ipv4_address":   "meshctl does not fix a container's address: remove it, and reach SERVICE by name (SERVICE, or CONTAINER)",
	"ipv6_address":   "meshctl does not fix a container's address: remove it, and reach SERVICE by name (SERVICE, or CONTAINER)",
	"link_local_ips": "meshctl does not fix a container's address: remove it, and reach SERVICE by name (SERVICE, or CONTAINER)",
	"driver_opts":    "meshctl creates plain bridge networks: remove driver_opts, or keep this project under Compose",
	"attachable":     "attachable is for Swarm's networks: remove it",
	"enable_ipv6":    "meshctl creates IPv4 networks: remove enable_ipv6, or keep this project under Compose",
	"priority":       "meshctl does not order a container's networks: remove priority",
	"gw_priority":    "meshctl does not choose a container's gateway network: remove gw_priority",
}

func init() { maps.Copy(nextSteps, networkSteps) }

// checkNetworks refuses the keys of the project's networks that a module
// network cannot carry, by path. model is the networks as written.
func (c *converter) checkNetworks(model any) {
	nets, _ := model.(map[string]any)
	for name, v := range nets {
		c.nested("networks."+name, v, topNetKeys)
	}
}

// checkServiceNetworks refuses the keys of a service's networks, in map
// form, that a container's networks cannot carry.
func (c *converter) checkServiceNetworks(path string, nets any) {
	m, _ := nets.(map[string]any)
	for name, v := range m {
		c.nested(path+"."+name, v, serviceNetKeys)
	}
}

// networks gives module m the project's networks that its containers use. It
// gives each container the networks its service joins, with their aliases.
// Every service without networks joins Compose's default network,
// PROJECT_default. It becomes the module network "default". As under Compose,
// its containers reach each other by service name.
func (c *converter) networks(m *mesh.Module) {
	names := map[string]string{} // Compose's name → the module's
	for _, sn := range slices.Sorted(maps.Keys(c.project.Services)) {
		s := c.project.Services[sn]
		ct := m.Containers[sn]
		if ct == nil || s.NetworkMode != "" || len(s.Networks) == 0 {
			continue
		}
		ct.Networks = mesh.ContainerNetworks{}
		for _, cn := range slices.Sorted(maps.Keys(s.Networks)) {
			name, ok := names[cn]
			if !ok {
				name, ok = c.moduleNetwork(m, cn)
				if !ok {
					continue
				}
				names[cn] = name
			}
			join := &mesh.NetworkJoin{}
			if sc := s.Networks[cn]; sc != nil {
				join.Aliases = slices.Clone(sc.Aliases)
			}
			ct.Networks[name] = join
		}
	}
	// Said where it matters, where two containers share it.
	if users := joining(m, "default"); names["default"] == "default" && len(users) > 1 {
		c.warnings = append(c.warnings, fmt.Sprintf("Compose's default network (%s) becomes the module network default "+
			"(engine name %s), which %s join: each reaches the others by service name, as under Compose, and by %s.SERVICE",
			c.project.Networks["default"].Name, mesh.NetworkName(c.module, "default"), strings.Join(users, ", "), c.module))
	}
}

// moduleNetwork adds the project's network cn to m and returns its module
// network name. ok is false when it is refused.
func (c *converter) moduleNetwork(m *mesh.Module, cn string) (string, bool) {
	p := "networks." + cn
	cfg, declared := c.project.Networks[cn]
	if !declared {
		return "", false // compose-go refuses an undeclared network itself
	}
	name := strings.ReplaceAll(strings.ToLower(cn), "_", "-")
	if !mesh.ValidName(name) {
		c.refused.add(p, "%q cannot be a module network's name: rename it with lower-case letters, digits and '-'", cn)
		return "", false
	}
	if name != cn {
		c.warnings = append(c.warnings, fmt.Sprintf("%s: network %s is called %s in the module (a module network's name is lower-case letters, digits and '-')", p, cn, name))
	}
	if m.Networks == nil {
		m.Networks = map[string]*mesh.Network{}
	}
	def := &mesh.Network{}
	switch {
	case bool(cfg.External):
		def.External = cfg.Name
	case cfg.Driver != "" && cfg.Driver != "bridge":
		c.refused.add(p+".driver", "%q is not carried over: meshctl creates bridge networks on this host; remove driver", cfg.Driver)
		return "", false
	default:
		def.Internal = cfg.Internal
		if want := c.project.Name + "_" + cn; cfg.Name != want {
			c.warnings = append(c.warnings, fmt.Sprintf("%s.name: %s is not carried over: meshctl names the network %s "+
				"(to join a network by that name, declare it external)", p, cfg.Name, mesh.NetworkName(c.module, name)))
		}
	}
	m.Networks[name] = def
	return name, true
}

// joining returns the containers of m that join its network net.
func joining(m *mesh.Module, net string) []string {
	var out []string
	for _, cn := range m.ContainerNames() {
		if _, ok := m.Containers[cn].Networks[net]; ok {
			out = append(out, cn)
		}
	}
	return out
}
