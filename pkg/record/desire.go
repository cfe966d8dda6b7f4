package record

import (
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// Resolver returns the current image of a module's artifact, and the build it
// came from. ok is false when the module has none.
type Resolver func(module string) (image, build string, ok bool, err error)

// Desire returns the desired containers of f in name order. It resolves every
// `artifact:` with resolve, unless pinned already holds the image for that
// container. It fails, touching nothing, on a module without a current build.
// key is the host's secret key (state.Dir.SecretKey). The contents of secret
// and config files are hashed with it. It is nil for a file without any.
func Desire(f *mesh.File, resolve Resolver, pinned map[string]Resolved, key []byte) ([]lifecycle.Desired, error) {
	// Sized first: a Desired is over a kilobyte, and growing the slice by
	// appending copied each one several times.
	n := 0
	for _, m := range f.Modules {
		n += len(m.Containers)
	}
	var out []lifecycle.Desired
	if n > 0 {
		out = make([]lifecycle.Desired, 0, n)
	}
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		for _, cn := range m.ContainerNames() {
			c := m.Containers[cn]
			d := lifecycle.Desired{Name: mesh.EngineName(mn, cn), Module: mn, Container: cn, Def: *c, Image: c.Image}
			d.Def.UpdateOrder = mesh.UpdateOrderOf(m, c) // the module's default resolved
			if p, ok := pinned[d.Name]; ok && c.PullPolicy() == mesh.PullAlways {
				d.PulledID = p.PulledID
			}
			if p, ok := pinned[d.Name]; ok && c.Artifact != "" {
				d.Image, d.Build = p.Image, p.Build
			} else if c.Artifact != "" {
				image, build, ok, err := resolve(c.Artifact)
				if err != nil {
					return nil, err
				}
				if !ok {
					return nil, noArtifact(c.Artifact, d.Name)
				}
				d.Image, d.Build = image, build
			}
			// env-files are read now, as env is. Their values go into the
			// spec, hashed, and into the engine's create, never into a
			// report.
			env, err := c.LoadEnv(d.Name)
			if err != nil {
				return nil, err
			}
			d.Def.Env = env
			// Secret and config files too. Only their keyed hashes reach the
			// spec. The engine mounts the files themselves.
			if d.Def, d.Warnings, err = d.Def.LoadFiles(d.Name, key); err != nil {
				return nil, err
			}
			d.Spec = d.Def.Spec(d.Image)
			d.Spec.Networks = f.SpecNetworks(mn, cn)
			out = append(out, d)
		}
	}
	return out, nil
}

// noArtifact reports a container whose artifact module has no current build.
// It is bad input (exit 2).
func noArtifact(module, container string) error {
	return fault.New(fault.BadInput, "container %s wants artifact %s, but module %s has no current build; record one with: meshctl build record ID --image REF",
		container, module, module)
}
