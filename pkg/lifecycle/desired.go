package lifecycle

import (
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
	// PulledID is the id of a `pull: always` image as this apply pulled
	// it. A container running another id is recreated.
	PulledID string
	// Warnings name the secret files of this container that other users
	// can read or change. Apply prints them. They never hold the content.
	Warnings []string
}

// IsService reports whether c is a service container of the state
// directory whose ID is scope. A window's step container is not one.
func IsService(c engine.Container, scope string) bool {
	return c.Labels[LabelManaged] == scope && c.Labels[LabelRole] != RoleStep
}

// IsStep reports whether c is a window's step container of the state
// directory whose ID is scope. It is the one test for a step container.
func IsStep(c engine.Container, scope string) bool {
	return c.Labels[LabelManaged] == scope && c.Labels[LabelRole] == RoleStep
}

// Managed is the label filter for the containers of the state directory
// whose ID is scope. It lists them in one engine call.
func Managed(scope string) map[string]string { return map[string]string{LabelManaged: scope} }

// OldName is the name a container takes while its replacement starts.
func OldName(name string) string { return strings.TrimSuffix(name, ".") + ".meshctl-old" }

// RetiringName is the name a start-first recreate gives the old container
// once its replacement has passed the health gate. The old one still runs,
// and goes once it has drained. coord.HealClaims carries such a recreate
// through.
func RetiringName(name string) string { return strings.TrimSuffix(name, ".") + ".meshctl-retiring" }

// AsideOf says whether name is one a recreate sets a container aside
// under, OldName or RetiringName. It returns the service's name.
func AsideOf(name string) (string, bool) {
	if base, ok := strings.CutSuffix(name, OldName("")); ok {
		return base, true
	}
	return strings.CutSuffix(name, RetiringName(""))
}

// HeldName is the name a window sets a container aside under, stopped,
// while it runs a changed copy under the name (while-changed).
func HeldName(name string) string { return strings.TrimSuffix(name, ".") + ".meshctl-held" }

// HeldOf says whether name is a HeldName. It returns the service's name.
func HeldOf(name string) (string, bool) { return strings.CutSuffix(name, HeldName("")) }

// NewName is the name a replacement is created under, before the container
// it replaces stops (Executor.Recreate).
func NewName(name string) string { return strings.TrimSuffix(name, ".") + ".meshctl-new" }

// RestartPolicies returns the restart policy each desired container is
// created with, by engine name. A later list wins over an earlier one.
func RestartPolicies(scope string, desired ...[]Desired) map[string]string {
	out := map[string]string{}
	for _, list := range desired {
		for i := range list {
			out[list[i].Name] = list[i].EngineSpec(scope).Restart
		}
	}
	return out
}
