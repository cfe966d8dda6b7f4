package convert

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	"go.yaml.in/yaml/v3"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// A service built from source (build:) runs the current build of its own
// ledger module, MODULE-SERVICE (docs/ledger.md). Its artifact is
// MODULE-SERVICE, also when it names an image. That is the tag Compose would
// give its build. But a tag on a host follows the last build pushed, not the
// last build requested, and the ledger exists to say the latter. The note
// printed above the container says how CI records each build, and with what
// image.

// A service whose image is one another service builds runs that service's
// build. An example is a worker running the web app's image. Compose would
// run the image built for it, and CI builds it once.

// build makes ct run s's build from the ledger, or the build of the service
// that builds its image. It returns the note for it, or "" when neither
// applies.
func (c *converter) build(path string, s types.ServiceConfig, ct *mesh.Container) string {
	builder := c.builderOf(s)
	if builder == "" {
		return ""
	}
	artifact := c.module + "-" + builder
	if !mesh.ValidName(c.module) || !mesh.ValidName(builder) {
		return "" // refused for its name already
	}
	if !mesh.ValidName(artifact) {
		c.refused.add(path+".build", "its ledger module would be %s, which is not a name (lower-case letters, digits, '-', at most 63): "+
			"convert with a shorter --module", artifact)
		return ""
	}
	ct.Image, ct.Artifact = "", artifact
	if builder != s.Name {
		return fmt.Sprintf("%s runs %s, the image %s builds: the current build of %s in meshctl's build ledger.", s.Name, s.Image, builder, artifact)
	}
	return buildNote(s, artifact)
}

// builderOf is the service whose build s runs, or "" when none. It is s
// itself when s has build, unless a service before it by name builds the same
// image. Otherwise it is the first service that builds s's image.
func (c *converter) builderOf(s types.ServiceConfig) string {
	if s.Image != "" {
		for _, name := range slices.Sorted(maps.Keys(c.project.Services)) {
			if o := c.project.Services[name]; o.Build != nil && o.Image == s.Image {
				return name
			}
		}
	}
	if s.Build != nil {
		return s.Name
	}
	return ""
}

// buildNote says where s is built from and how CI records its builds.
func buildNote(s types.ServiceConfig, artifact string) string {
	b := s.Build
	from := []string{"context " + relative(b.Context)}
	if b.Dockerfile != "" && b.Dockerfile != "Dockerfile" {
		from = append(from, "dockerfile "+b.Dockerfile)
	}
	if b.Target != "" {
		from = append(from, "target "+b.Target)
	}
	if len(b.Args) > 0 {
		// Names only: an argument's value may come from the shell.
		from = append(from, "args "+strings.Join(sortedKeys(b.Args), ", "))
	}
	if more := otherBuildKeys(b); len(more) > 0 {
		from = append(from, "and "+strings.Join(more, ", ")+" as the Compose file says")
	}
	ref := "its image pushed and pinned by digest, REGISTRY/" + s.Name + "@sha256:…"
	if s.Image != "" {
		ref = "its image pushed and pinned by digest, " + repository(s.Image) + "@sha256:… (Compose tags it " + s.Image + ")"
	}
	return fmt.Sprintf("%s is built from source (%s): it runs the current build of %s in meshctl's build ledger.\n"+
		"CI records each build: before building, meshctl build request %s (it prints the build ID);\n"+
		"after pushing, meshctl build record ID --image REF, REF: %s.\n"+
		"Its first build is requested with meshctl build request --new %s: the typo guard asks for --new\n"+
		"when a module it does not know is named like one it knows.",
		s.Name, strings.Join(from, ", "), artifact, artifact, ref, artifact)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// repository is image without its tag or digest.
func repository(image string) string {
	image, _, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// otherBuildKeys are the keys b sets beyond those the note spells out. CI
// builds as the Compose file says. The note names these keys so that none is
// dropped without a word.
func otherBuildKeys(b *types.BuildConfig) []string {
	var m map[string]any
	if data, err := yaml.Marshal(b); err != nil || yaml.Unmarshal(data, &m) != nil {
		return nil
	}
	for _, k := range []string{"context", "dockerfile", "target", "args"} {
		delete(m, k)
	}
	return sortedKeys(m)
}
