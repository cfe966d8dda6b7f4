package mesh

import (
	"errors"
	"time"

	"github.com/docker/go-units"
)

// Container is one container of a module, as the file asks for it.
type Container struct {
	Image    string `yaml:"image,omitempty" json:"image,omitempty"`
	Artifact string `yaml:"artifact,omitempty" json:"artifact,omitempty"`
	// Entrypoint overrides the image's. "entrypoint: []", empty and not nil,
	// clears it. The JSON tag is omitzero, not omitempty. The applied.json
	// that a window's close reads must keep [] apart from no entrypoint at
	// all.
	Entrypoint []string          `yaml:"entrypoint,omitempty" json:"entrypoint,omitzero"`
	Command    []string          `yaml:"command,omitempty" json:"command,omitempty"`
	Env        EnvVars           `yaml:"env,omitempty" json:"env,omitempty"`
	Volumes    []string          `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	Network    string            `yaml:"network,omitempty" json:"network,omitempty"`
	Ports      []string          `yaml:"ports,omitempty" json:"ports,omitempty"`
	Restart    string            `yaml:"restart,omitempty" json:"restart,omitempty"`
	Labels     map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Pull says when apply pulls the image. It is missing (the default),
	// always or never.
	Pull string `yaml:"pull,omitempty" json:"pull,omitempty"`
	// Networks are the module networks the container joins (see
	// ContainerNetworks). They cannot combine with Network.
	Networks ContainerNetworks `yaml:"networks,omitempty" json:"networks,omitempty"`
	// UpdateOrder is how a recreate replaces the container while it runs,
	// stop-first or start-first (UpdateOrderOf). An empty one takes the
	// module's. Drain is how long a start-first recreate leaves the old one
	// running once it has left the aliases (DrainOf). Neither is part of the
	// spec, so changing them recreates nothing.
	UpdateOrder string   `yaml:"update-order,omitempty" json:"update-order,omitempty"`
	Drain       Duration `yaml:"drain,omitempty" json:"drain,omitempty"`
	// ContainerFields are the rest, such as healthcheck, depends-on and
	// stop-signal.
	ContainerFields `yaml:",inline"`
}

// PullPolicy is when apply pulls a container's image (pull:).
type PullPolicy string

// The pull policies.
const (
	// PullMissing pulls an image the engine lacks; it is the default.
	PullMissing PullPolicy = "missing"
	// PullAlways pulls the image on every apply.
	PullAlways PullPolicy = "always"
	// PullNever never pulls; a missing image fails.
	PullNever PullPolicy = "never"
)

// PullPolicy returns the container's pull policy, "missing" when unset.
func (c *Container) PullPolicy() PullPolicy {
	if c.Pull == "" {
		return DefaultPull
	}
	return PullPolicy(c.Pull)
}

// ErrNeverPull is why an image that is missing is not pulled (pull: never).
var ErrNeverPull = errors.New("image missing and pull: never")

// PullRefused is the one rule for a missing image under pull: never.
// It returns ErrNeverPull when c's policy forbids the pull, else nil.
// Apply and a window's close both ask it, so both say the same.
func (c *Container) PullRefused() error {
	if c.PullPolicy() == PullNever {
		return ErrNeverPull
	}
	return nil
}

// ContainerFields are the fields a container takes beyond its image, command,
// env, volumes, network, ports, restart and labels. They have Compose's
// meaning and kebab-case spelling. Each is optional, and its zero value is
// the default. A spec recorded before the field existed reads as that
// default.
type ContainerFields struct {
	// Healthcheck is the probe a new container must pass before it replaces
	// the old one. nil leaves the image's, if any.
	Healthcheck *Healthcheck `yaml:"healthcheck,omitempty" json:"healthcheck,omitempty"`
	// DependsOn names the containers that are converged, and healthy, before
	// this one. A name is "name" in this module, "module.name" in another.
	DependsOn []string `yaml:"depends-on,omitempty" json:"depends-on,omitempty"`
	// StopSignal is what every stop meshctl makes sends first. The default is
	// SIGTERM, or the image's STOPSIGNAL.
	StopSignal string `yaml:"stop-signal,omitempty" json:"stop-signal,omitempty"`
	// StopGracePeriod is how long a stop waits before SIGKILL, 10s by
	// default.
	StopGracePeriod Duration `yaml:"stop-grace-period,omitempty" json:"stop-grace-period,omitempty"`
	User            string   `yaml:"user,omitempty" json:"user,omitempty"`
	WorkingDir      string   `yaml:"working-dir,omitempty" json:"working-dir,omitempty"`
	Hostname        string   `yaml:"hostname,omitempty" json:"hostname,omitempty"`
	Init            bool     `yaml:"init,omitempty" json:"init,omitempty"`
	ReadOnly        bool     `yaml:"read-only,omitempty" json:"read-only,omitempty"`
	// Tmpfs mounts are "/path" or "/path:options" (size=64m,mode=1777).
	Tmpfs   []string `yaml:"tmpfs,omitempty" json:"tmpfs,omitempty"`
	CapAdd  []string `yaml:"cap-add,omitempty" json:"cap-add,omitempty"`
	CapDrop []string `yaml:"cap-drop,omitempty" json:"cap-drop,omitempty"`
	// Memory is a limit such as "512m" or "2g" (at least 6m).
	Memory    string   `yaml:"memory,omitempty" json:"memory,omitempty"`
	CPUs      float64  `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	PidsLimit int64    `yaml:"pids-limit,omitempty" json:"pids-limit,omitempty"`
	Logging   *Logging `yaml:"logging,omitempty" json:"logging,omitempty"`
	// ExtraHosts are "host:ip" lines added to /etc/hosts.
	ExtraHosts []string `yaml:"extra-hosts,omitempty" json:"extra-hosts,omitempty"`
	// EnvFile names files of KEY=VALUE lines, read at apply time. Once
	// loaded, each path is absolute. A relative path is from the mesh file's
	// directory. A variable in env wins over one in a file, and a later file
	// over an earlier one.
	EnvFile StringOrList `yaml:"env-file,omitempty" json:"env-file,omitempty"`
	// Secrets and Configs are host files mounted read-only (see FileMount).
	Secrets []FileMount `yaml:"secrets,omitempty" json:"secrets,omitempty"`
	Configs []FileMount `yaml:"configs,omitempty" json:"configs,omitempty"`
	// Expose are ports ("80", "8080/udp", "9000-9002") the container
	// offers to others on its network, without publishing them.
	Expose  []string          `yaml:"expose,omitempty" json:"expose,omitempty"`
	Sysctls map[string]string `yaml:"sysctls,omitempty" json:"sysctls,omitempty"`
	// Ulimits are {nofile: {soft: 1024, hard: 4096}} or {nproc: 512}.
	Ulimits    map[string]Ulimit `yaml:"ulimits,omitempty" json:"ulimits,omitempty"`
	Privileged bool              `yaml:"privileged,omitempty" json:"privileged,omitempty"`
	StdinOpen  bool              `yaml:"stdin-open,omitempty" json:"stdin-open,omitempty"`
	TTY        bool              `yaml:"tty,omitempty" json:"tty,omitempty"`
	// DNS are the name servers, in order, instead of the engine's.
	DNS []string `yaml:"dns,omitempty" json:"dns,omitempty"`
}

// Ulimit is a resource limit. A single number in the file sets both.
type Ulimit struct {
	Soft int64 `yaml:"soft" json:"soft"`
	Hard int64 `yaml:"hard" json:"hard"`
}

// Healthcheck is a container's probe, as Compose's healthcheck.
type Healthcheck struct {
	// Test is ["CMD", prog, args…], ["CMD-SHELL", "command"] or ["NONE"]. A
	// plain string is a CMD-SHELL command.
	Test        HealthTest `yaml:"test,omitempty" json:"test,omitempty"`
	Interval    Duration   `yaml:"interval,omitempty" json:"interval,omitempty"`
	Timeout     Duration   `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Retries     int        `yaml:"retries,omitempty" json:"retries,omitempty"`
	StartPeriod Duration   `yaml:"start-period,omitempty" json:"start-period,omitempty"`
	// Disable turns off the image's healthcheck.
	Disable bool `yaml:"disable,omitempty" json:"disable,omitempty"`
}

// Logging is a container's log driver and its options.
type Logging struct {
	Driver  string            `yaml:"driver,omitempty" json:"driver,omitempty"`
	Options map[string]string `yaml:"options,omitempty" json:"options,omitempty"`
}

// Healthcheck defaults, the engine's.
const (
	DefaultHealthInterval = 30 * time.Second
	DefaultHealthTimeout  = 30 * time.Second
	DefaultHealthRetries  = 3
	// DefaultStopGracePeriod is how long a stop waits before it kills.
	DefaultStopGracePeriod = 10 * time.Second
	// MinMemory is the engine's smallest memory limit.
	MinMemory = 6 << 20
)

// StopGrace returns the container's stop grace period, 10s when unset.
func (c *Container) StopGrace() time.Duration {
	if c.StopGracePeriod == 0 {
		return DefaultStopGracePeriod
	}
	return c.StopGracePeriod.Std()
}

// MemoryBytes returns the memory limit in bytes, 0 when unset.
func (c *Container) MemoryBytes() int64 {
	if c.Memory == "" {
		return 0
	}
	n, err := units.RAMInBytes(c.Memory)
	if err != nil {
		return 0 // validated at decode
	}
	return n
}
