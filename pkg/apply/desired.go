// Package apply converges a host's containers to a mesh file: it resolves
// the file into desired containers, plans one action per container from what
// the engine reports and what live windows hold, and carries the plan out.
package apply

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// Labels meshctl puts on the containers it manages.
const (
	LabelManaged   = mesh.LabelPrefix + "managed"   // the state dir's ID (state.Dir.ID) on every container meshctl made
	LabelRole      = mesh.LabelPrefix + "role"      // "service" or "step"
	LabelModule    = mesh.LabelPrefix + "module"    // module name
	LabelContainer = mesh.LabelPrefix + "container" // container name in its module
	LabelSpec      = mesh.LabelPrefix + "spec"      // the canonical spec it was created from
	LabelBuild     = mesh.LabelPrefix + "build"     // build id, for an artifact: container
	LabelWindow    = mesh.LabelPrefix + "window"    // window id, on a step container

	RoleService = "service"
	RoleStep    = "step"
)

// Desired is one container as the mesh file wants it, its image resolved.
type Desired struct {
	Name      string // engine name, "module.container"
	Module    string
	Container string
	Def       mesh.Container
	Image     string // resolved image
	Build     string // build id when the image came from an artifact
	Spec      mesh.Spec
	// PulledID is, for pull: always, the id of the image as this apply
	// pulled it: a container running another id is recreated.
	PulledID string
}

// Resolver returns the current image of a module's artifact, and the build
// it came from; ok is false when the module has none.
type Resolver func(module string) (image, build string, ok bool, err error)

// Desire returns the desired containers of f in name order, resolving every
// artifact: with resolve, unless pinned holds the image for that container
// already. It fails, touching nothing, on a module without a current build.
func Desire(f *mesh.File, resolve Resolver, pinned map[string]Resolved) ([]Desired, error) {
	var out []Desired
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		for _, cn := range m.ContainerNames() {
			c := m.Containers[cn]
			d := Desired{Name: mesh.EngineName(mn, cn), Module: mn, Container: cn, Def: *c, Image: c.Image}
			if p, ok := pinned[d.Name]; ok && c.Artifact != "" {
				d.Image, d.Build = p.Image, p.Build
			} else if c.Artifact != "" {
				image, build, ok, err := resolve(c.Artifact)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, &NoArtifactError{Module: c.Artifact, Container: d.Name}
				}
				d.Image, d.Build = image, build
			}
			// env-files are read now, as env is: their values are in the
			// spec (hashed) and the engine's create, never in a report.
			env, err := c.LoadEnv(d.Name)
			if err != nil {
				return nil, err
			}
			d.Def.Env = env
			d.Spec = d.Def.Spec(d.Image)
			out = append(out, d)
		}
	}
	return out, nil
}

// NoArtifactError is an artifact: whose module has no current build (exit 2).
type NoArtifactError struct{ Module, Container string }

func (e *NoArtifactError) Error() string {
	return "container " + e.Container + " wants artifact " + e.Module + ", but module " + e.Module +
		" has no current build; record one with: meshctl build record ID --image REF"
}

// ExitCode maps a missing artifact to exit status 2.
func (e *NoArtifactError) ExitCode() int { return 2 }

// EngineSpec returns what the engine needs to create d, labelled as managed
// by the state directory whose ID is scope.
func (d Desired) EngineSpec(scope string) engine.Spec {
	labels := maps.Clone(d.Def.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManaged] = scope
	labels[LabelRole] = RoleService
	labels[LabelModule] = d.Module
	labels[LabelContainer] = d.Container
	labels[LabelSpec] = d.Spec.Encode()
	if d.Build != "" {
		labels[LabelBuild] = d.Build
	}
	restart := d.Def.Restart
	if restart == "" {
		restart = mesh.DefaultRestart
	}
	spec := engine.Spec{
		Image:       d.Image,
		Entrypoint:  slices.Clone(d.Def.Entrypoint), // keeps [] (clear the image's) apart from nil
		Cmd:         slices.Clone(d.Def.Command),
		Env:         envList(d.Def.Env),
		Binds:       slices.Clone(d.Def.Volumes),
		NetworkMode: d.Def.Network,
		Ports:       slices.Clone(d.Def.Ports),
		Restart:     restart,
		Labels:      labels,
	}
	containerFields(&spec, &d.Def)
	return spec
}

func envList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// IsService reports whether c is a service container (not a window's step
// container) of the state directory whose ID is scope.
func IsService(c engine.Container, scope string) bool {
	return c.Labels[LabelManaged] == scope && c.Labels[LabelRole] != RoleStep
}

// Managed is the label filter that lists the containers of the state
// directory whose ID is scope, in one engine call.
func Managed(scope string) map[string]string { return map[string]string{LabelManaged: scope} }

// oldName is the name a container takes while its replacement starts.
func oldName(name string) string { return strings.TrimSuffix(name, ".") + ".meshctl-old" }
