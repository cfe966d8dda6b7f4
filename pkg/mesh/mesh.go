// Package mesh is the desired-state file: its types, strict decoding and
// validation, and the canonical spec of a container from which equality and
// field-level differences are computed.
package mesh

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// File is a decoded and validated mesh file.
type File struct {
	Modules map[string]*Module `yaml:"modules" json:"modules"`
}

// Module is a few containers and the maintenance steps that hold them.
type Module struct {
	Containers map[string]*Container `yaml:"containers" json:"containers"`
	Steps      map[string]*Step      `yaml:"steps,omitempty" json:"steps,omitempty"`
}

// Container is one container of a module, as the file asks for it.
type Container struct {
	Image    string `yaml:"image,omitempty" json:"image,omitempty"`
	Artifact string `yaml:"artifact,omitempty" json:"artifact,omitempty"`
	// Entrypoint overrides the image's; "entrypoint: []" (empty, not nil)
	// clears it. omitzero, not omitempty: the applied.json a window's close
	// reads must keep [] apart from no entrypoint at all.
	Entrypoint []string          `yaml:"entrypoint,omitempty" json:"entrypoint,omitzero"`
	Command    []string          `yaml:"command,omitempty" json:"command,omitempty"`
	Env        EnvVars           `yaml:"env,omitempty" json:"env,omitempty"`
	Volumes    []string          `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	Network    string            `yaml:"network,omitempty" json:"network,omitempty"`
	Ports      []string          `yaml:"ports,omitempty" json:"ports,omitempty"`
	Restart    string            `yaml:"restart,omitempty" json:"restart,omitempty"`
	Labels     map[string]string `yaml:"labels,omitempty" json:"labels,omitempty"`
	// Pull says when apply pulls the image: missing (default), always, never.
	Pull string `yaml:"pull,omitempty" json:"pull,omitempty"`
	// ContainerFields are the rest (healthcheck, depends-on, stop-signal…):
	// see fields.go.
	ContainerFields `yaml:",inline"`
}

// Step is a maintenance step run by `meshctl window run`.
type Step struct {
	WhileStopped []string `yaml:"while-stopped,omitempty" json:"while-stopped,omitempty"`
	Timeout      Duration `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Run          *RunStep `yaml:"run,omitempty" json:"run,omitempty"`
	Exec         []string `yaml:"exec,omitempty" json:"exec,omitempty"`
}

// RunStep is a step run as a one-off container.
type RunStep struct {
	Image string `yaml:"image,omitempty" json:"image,omitempty"`
	// Entrypoint is as a container's: [] clears the image's.
	Entrypoint []string `yaml:"entrypoint,omitempty" json:"entrypoint,omitzero"`
	Command    []string `yaml:"command,omitempty" json:"command,omitempty"`
	Env        EnvVars  `yaml:"env,omitempty" json:"env,omitempty"`
	Volumes    []string `yaml:"volumes,omitempty" json:"volumes,omitempty"`
	// VolumesFrom defaults to the held containers.
	VolumesFrom []string `yaml:"volumes-from,omitempty" json:"volumes-from,omitempty"`
	Network     string   `yaml:"network,omitempty" json:"network,omitempty"`
}

// EnvVars are a container's environment variables. The file gives them as
// a map ({KEY: value}) or, as Compose does, a list (["KEY=value"]).
type EnvVars map[string]string

// UnmarshalYAML reads env as a map, or as Compose's list of KEY=value.
// Compose's bare KEY (the value taken from the caller's environment) is
// refused: an apply from CI and a window's close from cron would differ.
func (e *EnvVars) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		var m map[string]string
		if err := n.Decode(&m); err != nil {
			return err
		}
		*e = m
		return nil
	}
	m := map[string]string{}
	var errs []string
	for _, item := range n.Content {
		if item.Kind != yaml.ScalarNode {
			errs = append(errs, fmt.Sprintf("line %d: env item: want KEY=value, like \"A=1\"", item.Line))
			continue
		}
		k, v, ok := strings.Cut(item.Value, "=")
		switch _, dup := m[k]; {
		case !ok:
			errs = append(errs, fmt.Sprintf("line %d: env item %q: want KEY=value (a KEY without a value, taken from the environment, is not supported: write %s=…)", item.Line, item.Value, item.Value))
		case dup:
			errs = append(errs, fmt.Sprintf("line %d: env item %q: %s is set twice", item.Line, item.Value, k))
		default:
			m[k] = v
		}
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	*e = m
	return nil
}

// Defaults of the file format.
const (
	DefaultRestart     = "unless-stopped"
	DefaultStepTimeout = time.Hour
	DefaultPull        = "missing"
)

// Duration is a time.Duration written as "30m" in the file.
type Duration time.Duration

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// MarshalText writes d as "30m0s".
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads "30m".
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (use e.g. 90s, 30m, 2h)", b)
	}
	if v <= 0 {
		return fmt.Errorf("duration %q must be positive", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML reads "30m" from a mesh file. It reports a bad duration as a
// yaml.TypeError with its line, so that the error names the line and field;
// an error from UnmarshalText would reach the caller without either.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: cannot unmarshal %s into a duration", n.Line, n.ShortTag())}}
	}
	if err := d.UnmarshalText([]byte(n.Value)); err != nil {
		return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
	}
	return nil
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// ValidName reports whether s is a valid module, container or step name.
func ValidName(s string) bool { return nameRE.MatchString(s) }

// EngineName is the engine's name of a container: "module.container".
func EngineName(module, container string) string { return module + "." + container }

// ModuleNames returns the module names in order.
func (f *File) ModuleNames() []string { return sortedKeys(f.Modules) }

// ContainerNames returns the module's container names in order.
func (m *Module) ContainerNames() []string { return sortedKeys(m.Containers) }

// TimeoutOrDefault returns the step's timeout, 1h when unset.
func (s *Step) TimeoutOrDefault() time.Duration {
	if s.Timeout == 0 {
		return DefaultStepTimeout
	}
	return s.Timeout.Std()
}

// PullPolicy returns the container's pull policy, "missing" when unset.
func (c *Container) PullPolicy() string {
	if c.Pull == "" {
		return DefaultPull
	}
	return c.Pull
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
