package convert

import (
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// service converts one service and returns what to say about it. It records
// the refusals it finds.
func (c *converter) service(s types.ServiceConfig) (*mesh.Container, string) {
	p := "services." + s.Name
	if !mesh.ValidName(s.Name) {
		c.refused.add(p, "service name %q is not a container name (lower-case letters, digits, '-'); rename the service", s.Name)
	}
	ct := &mesh.Container{Image: s.Image, Labels: map[string]string(s.Labels)}
	note := c.build(p, s, ct)
	if s.Image == "" && s.Build == nil {
		c.refused.add(p+".image", "is missing: give the image to run")
	}
	if s.Entrypoint != nil {
		if len(s.Entrypoint) == 0 {
			c.refused.add(p+".entrypoint", "an empty entrypoint (clearing the image's) is not carried over: write entrypoint: [] in the mesh file")
		}
		ct.Entrypoint = []string(s.Entrypoint)
	}
	if len(s.Command) > 0 {
		ct.Command = []string(s.Command)
	}
	c.environment(p, s, ct)
	for i, port := range s.Ports {
		ct.Ports = append(ct.Ports, c.port(fmt.Sprintf("%s.ports[%d]", p, i), port))
	}
	for i, v := range s.Volumes {
		c.volume(fmt.Sprintf("%s.volumes[%d]", p, i), v, ct)
	}
	ct.Network = c.network(p+".network_mode", s.NetworkMode)
	ct.Restart = c.restart(p, s)
	ct.Pull = c.pull(p+".pull_policy", s)
	ct.Healthcheck = healthcheck(s.HealthCheck)
	ct.DependsOn = c.dependsOn(p+".depends_on", s)
	ct.StopSignal = s.StopSignal
	ct.StopGracePeriod = dur(s.StopGracePeriod)
	ct.User, ct.WorkingDir, ct.Hostname = s.User, s.WorkingDir, s.Hostname
	if s.Init != nil {
		ct.Init = *s.Init
	}
	ct.ReadOnly = s.ReadOnly
	ct.Tmpfs = append(ct.Tmpfs, s.Tmpfs...)
	ct.CapAdd, ct.CapDrop = s.CapAdd, s.CapDrop
	resources(s, ct)
	if s.Logging != nil {
		ct.Logging = &mesh.Logging{Driver: s.Logging.Driver, Options: map[string]string(s.Logging.Options)}
	}
	for _, host := range slices.Sorted(maps.Keys(s.ExtraHosts)) {
		for _, ip := range s.ExtraHosts[host] {
			ct.ExtraHosts = append(ct.ExtraHosts, host+":"+ip)
		}
	}
	c.fileMounts(p, s, ct)
	runtimeFields(s, ct)
	if s.ContainerName != "" {
		note = joinNotes(note, containerNameNote(s.ContainerName, c.module, s.Name))
	}
	if len(ct.Labels) == 0 {
		ct.Labels = nil
	}
	return ct, note
}

// runtimeFields carries what the process runs with: expose, sysctls,
// ulimits, privileged, stdin_open, tty and dns.
func runtimeFields(s types.ServiceConfig, ct *mesh.Container) {
	ct.Expose = []string(s.Expose)
	if len(s.Sysctls) > 0 {
		ct.Sysctls = map[string]string(s.Sysctls)
	}
	for name, u := range s.Ulimits {
		if u == nil {
			continue
		}
		if ct.Ulimits == nil {
			ct.Ulimits = map[string]mesh.Ulimit{}
		}
		l := mesh.Ulimit{Soft: int64(u.Soft), Hard: int64(u.Hard)}
		if u.Single != 0 {
			l = mesh.Ulimit{Soft: int64(u.Single), Hard: int64(u.Single)}
		}
		ct.Ulimits[name] = l
	}
	ct.Privileged, ct.StdinOpen, ct.TTY = s.Privileged, s.StdinOpen, s.Tty
	ct.DNS = []string(s.DNS)
}

// containerNameNote says what becomes of container_name. meshctl names every
// container MODULE.NAME, which is how it finds its own.
func containerNameNote(name, module, service string) string {
	return fmt.Sprintf("%s: container_name %s is not kept: meshctl names this container %s (docker logs %s); "+
		"other containers reach it by its service name, %s.", service, name, mesh.EngineName(module, service),
		mesh.EngineName(module, service), service)
}

// joinNotes puts two notes about one container one above the other.
func joinNotes(a, b string) string {
	if a == "" {
		return b
	}
	return a + "\n" + b
}

func (c *converter) network(path, mode string) string {
	switch mode {
	case "", "host", "none", "bridge":
		return mode
	}
	c.refused.add(path, "%q is not carried over (meshctl does not share one container's network with another): "+
		"use host, none or bridge, or put both services on a network (networks:), where each reaches the other by name", mode)
	return ""
}

func (c *converter) pull(path string, s types.ServiceConfig) string {
	switch s.PullPolicy {
	case "", "missing", "if_not_present":
	case "always", "never":
		return s.PullPolicy
	case "build":
		if s.Build == nil {
			c.refused.add(path, "build needs build: (or use missing, always or never)")
		} // else the ledger's current build: see build.go
	default:
		c.refused.add(path, "%q is not carried over: use missing, always or never", s.PullPolicy)
	}
	return ""
}

func healthcheck(h *types.HealthCheckConfig) *mesh.Healthcheck {
	if h == nil {
		return nil
	}
	hc := &mesh.Healthcheck{Test: mesh.HealthTest(h.Test), Disable: h.Disable,
		Interval: dur(h.Interval), Timeout: dur(h.Timeout), StartPeriod: dur(h.StartPeriod)}
	if h.Retries != nil {
		hc.Retries = int(*h.Retries)
	}
	if h.Disable {
		hc.Test = nil
	}
	return hc
}

// resources are the limits of mem_limit, cpus and pids_limit, or of
// deploy.resources.limits where it sets them.
func resources(s types.ServiceConfig, ct *mesh.Container) {
	mem, cpus, pids := int64(s.MemLimit), float64(s.CPUS), s.PidsLimit
	if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
		l := s.Deploy.Resources.Limits
		if l.MemoryBytes > 0 {
			mem = int64(l.MemoryBytes)
		}
		if l.NanoCPUs > 0 {
			cpus = float64(l.NanoCPUs)
		}
		if l.Pids > 0 {
			pids = l.Pids
		}
	}
	if mem > 0 {
		ct.Memory = memory(mem)
	}
	ct.CPUs = math.Round(cpus*1000) / 1000
	ct.PidsLimit = pids
}

// restart is s's restart policy as Compose sets it.
// deploy.restart_policy.condition overrides restart, with Compose's mapping
// of none to no and any to always. Compose's default "no" is written out,
// since meshctl's default is unless-stopped.
func (c *converter) restart(path string, s types.ServiceConfig) string {
	r, p := s.Restart, path+".restart"
	if s.Deploy != nil && s.Deploy.RestartPolicy != nil {
		r, p = s.Deploy.RestartPolicy.Condition, path+".deploy.restart_policy.condition"
		switch r {
		case "none":
			r = "no"
		case "any":
			r = "always"
		}
	}
	switch r {
	case "":
		return "no"
	case "no", "always", "unless-stopped", "on-failure":
		return r
	}
	c.refused.add(p, "%q is not carried over: use no, always, unless-stopped or on-failure (meshctl has no limit of attempts)", r)
	return ""
}

// dependsOn carries s's dependencies. meshctl starts a container after its
// dependencies run and are healthy, whatever the condition. A dependency is
// always required. Compose's other conditions are refused, and so are an
// optional dependency and restart: true. Each refusal says what to do.
func (c *converter) dependsOn(path string, s types.ServiceConfig) []string {
	var deps []string
	for _, dn := range slices.Sorted(maps.Keys(s.DependsOn)) {
		d, p := s.DependsOn[dn], path+"."+dn
		switch d.Condition {
		case "", types.ServiceConditionStarted, types.ServiceConditionHealthy:
		default:
			c.refused.add(p+".condition", "%q is not carried over: meshctl waits for dependencies to run and be healthy; "+
				"run a one-off task such as a migration as a window step (steps: in the mesh file), and remove the dependency", d.Condition)
		}
		if !d.Required {
			c.refused.add(p+".required", "false is not carried over: a meshctl dependency is always required (apply refuses a file "+
				"without %s); remove required: false, or the dependency", dn)
		}
		if d.Restart {
			c.refused.add(p+".restart", "true is not carried over: meshctl does not restart %s when %s is recreated; remove restart: true "+
				"(make %s reconnect on its own), or restart it with a window step after %s changes", s.Name, dn, s.Name, dn)
		}
		deps = append(deps, dn)
	}
	return deps
}

func (c *converter) port(path string, p types.ServicePortConfig) string {
	if p.Mode != "" && p.Mode != "ingress" && p.Mode != "host" {
		c.refused.add(path+".mode", "%q is not carried over: remove mode (meshctl publishes on this host)", p.Mode)
	}
	s := strconv.FormatUint(uint64(p.Target), 10)
	if p.Published != "" {
		s = p.Published + ":" + s
		if p.HostIP != "" {
			s = p.HostIP + ":" + s
		}
	} else if p.HostIP != "" {
		s = p.HostIP + "::" + s
	}
	if p.Protocol != "" && p.Protocol != "tcp" {
		s += "/" + p.Protocol
	}
	return s
}

func (c *converter) volume(path string, v types.ServiceVolumeConfig, ct *mesh.Container) {
	mode := ""
	if v.ReadOnly {
		mode = ":ro"
	}
	switch v.Type {
	case types.VolumeTypeBind:
		if v.Bind != nil && (v.Bind.Propagation != "" && v.Bind.Propagation != "rprivate" || v.Bind.SELinux != "" || v.Bind.Recursive != "") {
			c.refused.add(path+".bind", "bind options (propagation, selinux, recursive) are not carried over: remove them, or keep this service under Compose")
		}
		if rel, ok := c.inProject(v.Source); ok {
			c.warnings = append(c.warnings, fmt.Sprintf("%s: %s, in the project's directory, is written as the absolute path %s "+
				"(a meshctl bind mount takes one): apply the file where the project is checked out there, or edit it", path, rel, v.Source))
		}
		ct.Volumes = append(ct.Volumes, v.Source+":"+v.Target+mode)
	case types.VolumeTypeVolume:
		if v.Volume != nil && (v.Volume.NoCopy || v.Volume.Subpath != "" || len(v.Volume.Labels) > 0) {
			c.refused.add(path+".volume", "volume options (nocopy, subpath, labels) are not carried over: remove them, or keep this service under Compose")
		}
		if v.Source == "" {
			c.refused.add(path, "an anonymous volume is not carried over: name it (NAME:%s), so that a recreate keeps its data", v.Target)
			return
		}
		name := v.Source
		if tv, ok := c.project.Volumes[v.Source]; ok {
			if tv.External {
				c.refused.add("volumes."+v.Source+".external", "not carried over: replace external: true with name: %s "+
					"(meshctl uses that volume, and creates it when missing)", tv.Name)
			}
			if tv.Driver != "" && tv.Driver != "local" || len(tv.DriverOpts) > 0 || len(tv.Labels) > 0 {
				c.refused.add("volumes."+v.Source, "a volume with a driver, options or labels is not carried over: create it first "+
					"(docker volume create --driver … %s) and remove them here: meshctl uses an existing volume by name", tv.Name)
			}
			if tv.Name != "" {
				// The name Compose gave it, PROJECT_NAME, so the data stays.
				name = tv.Name
			}
		}
		ct.Volumes = append(ct.Volumes, name+":"+v.Target+mode)
	case types.VolumeTypeTmpfs:
		opts := []string{}
		if v.Tmpfs != nil && v.Tmpfs.Size > 0 {
			opts = append(opts, "size="+strconv.FormatInt(int64(v.Tmpfs.Size), 10))
		}
		if v.Tmpfs != nil && v.Tmpfs.Mode != 0 {
			opts = append(opts, fmt.Sprintf("mode=%o", v.Tmpfs.Mode))
		}
		t := v.Target
		if len(opts) > 0 {
			t += ":" + strings.Join(opts, ",")
		}
		ct.Tmpfs = append(ct.Tmpfs, t)
	default:
		c.refused.add(path+".type", "%q is not carried over: use a named volume, a bind mount (an absolute host path) or tmpfs", v.Type)
	}
}

func dur(d *types.Duration) mesh.Duration {
	if d == nil || *d <= 0 {
		return 0
	}
	return mesh.Duration(time.Duration(*d))
}

// memory writes bytes as the largest unit that divides it: 512m, 2g.
func memory(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if b%u.size == 0 {
			return strconv.FormatInt(b/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10) + "b"
}

// inProject says whether path is under the project's directory, and where
// in it.
func (c *converter) inProject(path string) (string, bool) {
	rel, err := filepath.Rel(c.project.WorkingDir, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// updateOrders carries deploy.update_config.order, which is Swarm's and means
// the same to meshctl. It sets start-first where the container can be
// replaced so (mesh.StartFirstBlocker). Where it cannot, the order is refused
// with the reason. It runs once the containers have their networks.
func (c *converter) updateOrders(m *mesh.Module) {
	for _, name := range slices.Sorted(maps.Keys(c.project.Services)) {
		s, ct := c.project.Services[name], m.Containers[name]
		if ct == nil || s.Deploy == nil || s.Deploy.UpdateConfig == nil || s.Deploy.UpdateConfig.Order == "" {
			continue
		}
		p := "services." + name + ".deploy.update_config.order"
		switch order := s.Deploy.UpdateConfig.Order; order {
		case mesh.StopFirst:
			ct.UpdateOrder = order
		case mesh.StartFirst:
			if why := mesh.StartFirstBlocker(ct); why != "" {
				c.refused.add(p, "start-first cannot hold for this service: %s", why)
				continue
			}
			ct.UpdateOrder = order
		default:
			c.refused.add(p, "%q is not an update order: use start-first or stop-first", order)
		}
	}
}
