package engine

import (
	"maps"
	"slices"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/go-connections/nat"
	"github.com/docker/go-units"
)

// containerFields sets, on the engine's create request, what Spec's
// container fields ask for.
func containerFields(cfg *container.Config, host *container.HostConfig, spec Spec) {
	cfg.StopSignal = spec.StopSignal
	cfg.User = spec.User
	cfg.WorkingDir = spec.WorkingDir
	cfg.Hostname = spec.Hostname
	if h := spec.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, Retries: h.Retries}
	}
	if spec.Init {
		yes := true
		host.Init = &yes
	}
	host.ReadonlyRootfs = spec.ReadOnly
	host.Tmpfs = spec.Tmpfs
	host.CapAdd = spec.CapAdd
	host.CapDrop = spec.CapDrop
	host.Resources.Memory = spec.Memory
	host.Resources.NanoCPUs = spec.NanoCPUs
	if spec.PidsLimit != 0 {
		n := spec.PidsLimit
		host.Resources.PidsLimit = &n
	}
	if spec.LogDriver != "" {
		host.LogConfig = container.LogConfig{Type: spec.LogDriver, Config: spec.LogOptions}
	}
	host.ExtraHosts = spec.ExtraHosts
	for _, e := range spec.Expose {
		if cfg.ExposedPorts == nil {
			cfg.ExposedPorts = nat.PortSet{}
		}
		cfg.ExposedPorts[nat.Port(e)] = struct{}{}
	}
	host.Sysctls = spec.Sysctls
	for _, u := range spec.Ulimits {
		host.Resources.Ulimits = append(host.Resources.Ulimits, &units.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	host.Privileged = spec.Privileged
	cfg.OpenStdin, cfg.Tty = spec.StdinOpen, spec.Tty
	host.DNS = spec.DNS
	for _, target := range slices.Sorted(maps.Keys(spec.Files)) {
		host.Mounts = append(host.Mounts, mount.Mount{Type: mount.TypeBind, Source: spec.Files[target], Target: target, ReadOnly: true})
	}
}
