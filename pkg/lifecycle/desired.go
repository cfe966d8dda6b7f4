// Package lifecycle is how meshctl creates, replaces, stops and brings
// back a container: its labels, its spec as the engine gets it, create and
// recreate with put-back, the health wait, stale holds brought back as a
// window's close would, and the depends-on order. The apply command (its
// plan) and the window (its close) both use it.
package lifecycle

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
func OldName(name string) string { return strings.TrimSuffix(name, ".") + ".meshctl-old" }
