package record

import (
	"bytes"

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
			// Built in place. A Desired copied into the slice cost as much
			// as its spec (docs/performance.md).
			out = append(out, lifecycle.Desired{Name: mesh.EngineName(mn, cn), Module: mn, Container: cn, Def: *c, Image: c.Image})
			d := &out[len(out)-1]
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
			// spec. The engine mounts the files themselves. A container
			// without any is not copied again.
			if len(c.Secrets)+len(c.Configs) > 0 {
				if d.Def, d.Warnings, err = d.Def.LoadFiles(d.Name, key); err != nil {
					return nil, err
				}
			}
			d.Spec = d.Def.Spec(d.Image)
			d.Spec.Networks = f.SpecNetworks(mn, cn)
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

// Desiring is a Desire and what it read: the file, the key and each
// artifact's answer. Again reuses its containers when those are the same.
// So an apply resolves its containers once when nothing changed between
// its look before the state lock and its plan under it.
type Desiring struct {
	Desired []lifecycle.Desired
	file    *mesh.File
	key     []byte
	// answers are the artifacts' answers, in the order Desire asked.
	answers []answer
	// reusable is false for a file that references files, since Desire
	// reads those. It is false too once Again gave Desired away.
	reusable bool
}

// answer is what resolve said of one artifact module, first asked for by
// container (its engine name).
type answer struct {
	module, container, image, build string
}

// DesireOnce is Desire of f without pinned images. It records what Again
// needs to tell whether Desired may be reused.
func DesireOnce(f *mesh.File, resolve Resolver, key []byte) (*Desiring, error) {
	p := &Desiring{file: f, key: key, reusable: !referencesFiles(f)}
	asked := map[string]int{}
	desired, err := Desire(f, func(module string) (string, string, bool, error) {
		image, build, ok, err := resolve(module)
		if err == nil && ok {
			if i, seen := asked[module]; !seen {
				asked[module] = len(p.answers)
				p.answers = append(p.answers, answer{module: module, image: image, build: build})
			} else if a := p.answers[i]; a.image != image || a.build != build {
				p.reusable = false // an answer changed during the Desire
			}
		}
		return image, build, ok, err
	}, nil, key)
	if err != nil {
		return nil, err
	}
	p.Desired = desired
	for i := range p.answers {
		p.answers[i].container = firstWith(desired, p.answers[i].module)
	}
	return p, nil
}

// Again is Desire(f, resolve, nil, key). It returns p's containers, once,
// when f is p's file, key its key, and each artifact resolves as it did.
// Each artifact module is then resolved once, in the order Desire asks.
// Desire runs again otherwise, and on a nil p.
func (p *Desiring) Again(f *mesh.File, resolve Resolver, key []byte) ([]lifecycle.Desired, error) {
	if p == nil || !p.reusable || f != p.file || !bytes.Equal(key, p.key) {
		return Desire(f, resolve, nil, key)
	}
	for _, a := range p.answers {
		image, build, ok, err := resolve(a.module)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, noArtifact(a.module, a.container)
		}
		if image != a.image || build != a.build {
			return Desire(f, resolve, nil, key)
		}
	}
	p.reusable = false // the caller may change what it was given
	return p.Desired, nil
}

// referencesFiles reports whether a container of f has an env-file, a
// secret or a config. Desire reads those files each time.
func referencesFiles(f *mesh.File) bool {
	for _, m := range f.Modules {
		for _, c := range m.Containers {
			if len(c.EnvFile)+len(c.Secrets)+len(c.Configs) > 0 {
				return true
			}
		}
	}
	return false
}

// firstWith is the engine name of the first container of desired whose
// artifact is module.
func firstWith(desired []lifecycle.Desired, module string) string {
	for _, d := range desired {
		if d.Def.Artifact == module {
			return d.Name
		}
	}
	return ""
}
