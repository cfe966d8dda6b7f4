package convert

import (
	"context"
	"maps"
	"os"
	"slices"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// Options is one conversion.
type Options struct {
	// Files are the Compose files, merged in order (compose.yaml and its
	// overrides).
	Files []string
	// Module names the module; default the Compose project's name.
	Module string
	// Profiles are the profiles to enable.
	Profiles []string
	// Env is the environment for interpolation, os.Environ(). A .env next to
	// the first file is read too, as Compose does. A value from it is never
	// written into environment (see env.go).
	Env []string
}

// Result is a conversion's mesh file and what to say with it.
type Result struct {
	File   *mesh.File
	Module string
	// Notes are said about a container, by name. Each is printed above its
	// container.
	Notes map[string]string
	// Warnings are compose-go's, in meshctl's words, each once.
	Warnings []string
}

// Project converts the Compose project of files into module. The files merge
// in order, with profiles enabled, and interpolate from this process's
// environment. It is what meshctl convert prints, as cli.Converter in
// cmd/meshctl-convert. The warnings come also with an error.
func Project(ctx context.Context, files []string, module string, profiles []string) (*mesh.File, map[string]string, []string, error) {
	r, err := Convert(ctx, Options{Files: files, Module: module, Profiles: profiles, Env: os.Environ()})
	if err != nil {
		return nil, nil, r.Warnings, err
	}
	return r.File, r.Notes, r.Warnings, nil
}

// Convert loads the project and returns the mesh file of one module. The
// Result is never nil. Its Warnings come also with an error.
func Convert(ctx context.Context, opts Options) (*Result, error) {
	l, err := load(ctx, opts)
	r := &Result{Warnings: l.warnings}
	if err != nil {
		return r, err
	}
	c := &converter{project: l.project, module: opts.Module, shell: envNames(opts.Env), refused: refusals{}}
	if c.module == "" {
		c.module = l.project.Name
	}
	if !mesh.ValidName(c.module) {
		c.refused.add("name", "project name %q is not a module name (lower-case letters, digits, '-'): pass --module NAME", c.module)
	}
	c.checkModel(l.model)
	m, notes := c.containers()
	c.networks(m)
	c.updateOrders(m)
	if err := c.refused.err(); err != nil {
		return r, err
	}
	r.File = &mesh.File{Modules: map[string]*mesh.Module{c.module: m}}
	r.Module, r.Notes = c.module, notes
	for _, w := range c.warnings {
		r.Warnings = append(r.Warnings, firstFile(l.files)+": "+w)
	}
	return r, nil
}

type converter struct {
	project *types.Project
	module  string
	// shell are the names the process environment sets.
	shell   map[string]bool
	refused refusals
	// warnings are said about keys carried over, by path.
	warnings []string
}

// containers converts every enabled service, with the notes said about them.
func (c *converter) containers() (*mesh.Module, map[string]string) {
	m := &mesh.Module{Containers: map[string]*mesh.Container{}}
	notes := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.project.Services)) {
		ct, note := c.service(c.project.Services[name])
		m.Containers[name] = ct
		if note != "" {
			notes[name] = note
		}
	}
	return m, notes
}
