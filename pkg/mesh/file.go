package mesh

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/meshctl/meshctl/pkg/lazyre"
)

// File is a decoded and validated mesh file.
type File struct {
	Modules map[string]*Module `yaml:"modules" json:"modules"`
}

// Module is a few containers and the maintenance steps that hold them.
type Module struct {
	Containers map[string]*Container `yaml:"containers" json:"containers"`
	Steps      map[string]*Step      `yaml:"steps,omitempty" json:"steps,omitempty"`
	// Networks are the module's networks, by name (see Network).
	Networks map[string]*Network `yaml:"networks,omitempty" json:"networks,omitempty"`
	// UpdateOrder is its containers' update order where they give none.
	UpdateOrder string `yaml:"update-order,omitempty" json:"update-order,omitempty"`
	// MaxUnavailable is how many hosts of the mesh may have the module down
	// at once (see Budget). Nil sets no budget. It needs an etcd ledger.
	MaxUnavailable *Hosts `yaml:"max-unavailable,omitempty" json:"max-unavailable,omitempty"`
}

// Budget returns the module's max-unavailable, 0 when it sets none.
func (m *Module) Budget() int {
	if m == nil || m.MaxUnavailable == nil {
		return 0
	}
	return int(*m.MaxUnavailable)
}

// Budgeted returns the modules of f that set max-unavailable, in order.
func (f *File) Budgeted() []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, n := range f.ModuleNames() {
		if f.Modules[n].Budget() > 0 {
			out = append(out, n)
		}
	}
	return out
}

// UsesMesh reports whether the module uses the mesh in etcd. It does when
// it sets max-unavailable or has a mesh: all step. Each host that runs it
// then keeps a member record there.
func (m *Module) UsesMesh() bool {
	return m.Budget() > 0 || m != nil && len(m.MeshSteps()) > 0
}

// MeshModules returns the modules of f that use the mesh, in order.
func (f *File) MeshModules() []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, n := range f.ModuleNames() {
		if f.Modules[n].UsesMesh() {
			out = append(out, n)
		}
	}
	return out
}

// Step is a maintenance step run by `meshctl window run`.
type Step struct {
	WhileStopped []string `yaml:"while-stopped,omitempty" json:"while-stopped,omitempty"`
	// WhileChanged are containers that run changed while the step runs,
	// by name. Each is a read-only registry, say, where another would be
	// stopped.
	WhileChanged map[string]*Change `yaml:"while-changed,omitempty" json:"while-changed,omitempty"`
	Timeout      Duration           `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	// StallAfter is how long a running step may print nothing before
	// status --check reports it. Zero, the default, never reports it.
	StallAfter Duration `yaml:"stall-after,omitempty" json:"stall-after,omitempty"`
	Run        *RunStep `yaml:"run,omitempty" json:"run,omitempty"`
	Exec       []string `yaml:"exec,omitempty" json:"exec,omitempty"`
	// Mesh is where the step holds: MeshHost ("" too), this host only, or
	// MeshAll, every host that runs the module, the step run once.
	Mesh string `yaml:"mesh,omitempty" json:"mesh,omitempty"`
	// Gather is how long the hosts of a mesh: all step wait for each
	// other. Zero is DefaultGather.
	Gather Duration `yaml:"gather,omitempty" json:"gather,omitempty"`
}

// Where a step holds (Step.Mesh).
const (
	MeshHost = "host"
	MeshAll  = "all"
)

// DefaultGather is how long the hosts of a mesh window wait for each other
// when the step sets no gather.
const DefaultGather = 5 * time.Minute

// MeshAll says that the step is a mesh window: every host of the module
// holds, and one runs the step.
func (s *Step) MeshAll() bool { return s != nil && s.Mesh == MeshAll }

// MeshText says where the step holds, as a person reads it: "mesh: all,
// gather 10m0s" or "mesh: host".
func (s *Step) MeshText() string {
	if !s.MeshAll() {
		return "mesh: " + MeshHost
	}
	return "mesh: " + MeshAll + ", gather " + s.GatherOrDefault().String()
}

// GatherOrDefault returns the step's gather, DefaultGather when unset.
func (s *Step) GatherOrDefault() time.Duration {
	if s.Gather == 0 {
		return DefaultGather
	}
	return s.Gather.Std()
}

// Change is how a window changes a container for its step. It changes how
// the container runs, never what it is. So it takes no image, volume or
// port. Env wins over the container's env and env-file, key by key.
type Change struct {
	Env EnvVars `yaml:"env,omitempty" json:"env,omitempty"`
	// Entrypoint is as a container's, and [] clears the image's.
	Entrypoint  []string     `yaml:"entrypoint,omitempty" json:"entrypoint,omitzero"`
	Command     []string     `yaml:"command,omitempty" json:"command,omitempty"`
	Healthcheck *Healthcheck `yaml:"healthcheck,omitempty" json:"healthcheck,omitempty"`
}

// Empty reports whether c changes nothing.
func (c *Change) Empty() bool {
	return c == nil || len(c.Env) == 0 && c.Entrypoint == nil && c.Command == nil && c.Healthcheck == nil
}

// Held returns the containers the step holds, by name. The stopped ones
// come first, in the file's order, then the changed ones by name.
func (s *Step) Held() []string {
	return append(append([]string{}, s.WhileStopped...), s.ChangedNames()...)
}

// ChangedNames returns the names of the containers held changed, sorted.
func (s *Step) ChangedNames() []string { return sortedKeys(s.WhileChanged) }

// RunStep is a step run as a one-off container.
type RunStep struct {
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Entrypoint is as a container's, and [] clears the image's.
	Entrypoint []string `yaml:"entrypoint,omitempty" json:"entrypoint,omitzero"`
	Command    []string `yaml:"command,omitempty" json:"command,omitempty"`
	Env        EnvVars  `yaml:"env,omitempty" json:"env,omitempty"`
	Volumes    []string `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	// VolumesFrom defaults to the held containers.
	VolumesFrom []string `yaml:"volumes-from,omitempty" json:"volumes-from,omitempty"`
	Network     string   `yaml:"network,omitempty" json:"network,omitempty"`
}

// Defaults of the file format.
const (
	DefaultRestart     = "unless-stopped"
	DefaultStepTimeout = time.Hour
	DefaultPull        = PullMissing
)

var nameRE = lazyre.New(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidName reports whether s is a valid module, container or step name.
func ValidName(s string) bool { return nameRE().MatchString(s) }

// EngineName is the engine's name of a container: "module.container".
func EngineName(module, container string) string { return module + "." + container }

// ModuleNames returns the module names in order.
func (f *File) ModuleNames() []string { return sortedKeys(f.Modules) }

// ContainerNames returns the module's container names in order.
func (m *Module) ContainerNames() []string { return sortedKeys(m.Containers) }

// MeshSteps returns the names of the module's mesh: all steps, sorted.
func (m *Module) MeshSteps() []string {
	var out []string
	for _, n := range sortedKeys(m.Steps) {
		if m.Steps[n].MeshAll() {
			out = append(out, n)
		}
	}
	return out
}

// TimeoutOrDefault returns the step's timeout, 1h when unset.
func (s *Step) TimeoutOrDefault() time.Duration {
	if s.Timeout == 0 {
		return DefaultStepTimeout
	}
	return s.Timeout.Std()
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Changed returns c as ch changes it. c's env must hold its env-file's
// already (LoadEnv). Each variable of ch.Env wins over c's, and each list
// ch gives replaces c's. Nothing of c is shared with the result.
func (c Container) Changed(ch *Change) Container {
	out := c
	out.Env = maps.Clone(c.Env)
	if out.Env == nil && len(ch.Env) > 0 {
		out.Env = EnvVars{}
	}
	maps.Copy(out.Env, ch.Env)
	out.EnvFile = nil
	if ch.Entrypoint != nil {
		out.Entrypoint = slices.Clone(ch.Entrypoint)
	}
	if ch.Command != nil {
		out.Command = slices.Clone(ch.Command)
	}
	if ch.Healthcheck != nil {
		hc := *ch.Healthcheck
		out.Healthcheck = &hc
	}
	return out
}
