package cli

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// Converter reads a Compose project as one mesh module. The project's
// files are merged in order, with the profiles enabled. It returns notes to
// print above some of its containers, by name, and warnings for stderr.
// The warnings come also with an error. Converter is set in meshctl-convert
// alone, by cmd/meshctl-convert to convert.Project. compose-go, which it
// needs, would cost every meshctl command milliseconds of package
// initialisation, for its JSON-schema compiler (docs/performance.md).
// Where it is nil, as in meshctl, `meshctl convert` runs meshctl-convert
// with the same arguments.
var Converter func(ctx context.Context, files []string, module string, profiles []string) (
	file *mesh.File, notes map[string]string, warnings []string, err error)

// convertHelper is the program that carries out `meshctl convert`.
const convertHelper = "meshctl-convert"

type convertOptions struct {
	files    []string
	module   string
	profiles []string
}

func newConvertCmd(env *Env) *cobra.Command {
	opts := &convertOptions{}
	cmd := &cobra.Command{
		Use:   "convert [-f compose.yaml]...",
		Short: "Print the mesh module equivalent to a Compose project",
		Long: `Print the mesh module equivalent to a Compose project (default: compose.yaml
or docker-compose.yml in the current directory; -f again merges overrides).

The project is read as Compose reads it (compose-go): variables are
interpolated from the environment and .env, profiles (--profile) select
services, overrides and extends are merged. Each service becomes a container
of one module (--module, default the project's name), with its image,
command, entrypoint, environment, env_file (kept a file: read at apply time,
never printed; written relative to the working directory, where the output
is saved), ports, volumes (named volumes keep the name Compose gave them, so
the data stays), network_mode, restart (Compose's default "no" is written
out), labels, pull_policy, healthcheck, depends_on, stop_signal,
stop_grace_period, user, working_dir, hostname, init, read_only, tmpfs,
cap_add, cap_drop, mem_limit, cpus, pids_limit, deploy.resources.limits,
logging, extra_hosts, expose, sysctls, ulimits, privileged, stdin_open, tty
and dns. Secrets and configs defined with file: become secrets: and configs:
(the file relative to the working directory, as env_file); one taken from
the environment, an external one or inline content is refused, saying to
make it a file. container_name is not kept: a comment above the container
says it is named MODULE.NAME and reached by its service name.

Networks become module networks: Compose's default network, which every
service without networks: joins, becomes the module network default
(engine name meshctl.MODULE.default), so that the services reach each other
by service name as under Compose; a named network keeps its internal flag
and its aliases, an external one is joined by its engine name. ipam, a
driver other than bridge, driver_opts and fixed addresses are refused.

A service with build: runs the current build of its own ledger module,
artifact: MODULE-SERVICE, also when it names an image: too. A comment above
it (on stderr with -o json) says how CI records each build: meshctl build
request MODULE-SERVICE before building, meshctl build record ID --image REF
after pushing, and that the first build is requested with --new.

A value from the shell is never written: an environment entry that Compose
would take from it (- API_TOKEN, or ${X} set in the shell) is refused,
saying to put it in an env_file. Values from .env are written.

Any other key (runtime, platform, ports in long form with options
meshctl lacks, …) is refused by name, each once with
what to do instead, and nothing is printed: a conversion never drops a key
silently. x-* extensions are ignored, as Compose ignores them. compose-go's
warnings and errors are said in meshctl's words, each once, with the file
and key.

meshctl runs meshctl-convert, shipped beside it, for this command (found
beside meshctl, else on PATH): the Compose library stays out of meshctl.`,
		Example: `  meshctl convert > mesh.yaml
  meshctl convert -f compose.yaml -f compose.prod.yaml --profile db --module shop > shop.yaml
  meshctl convert | meshctl apply -f -`,
		Annotations: map[string]string{exitStatusKey: `  0  printed the module
  2  a key that cannot be carried over (each is named), a file Compose cannot load,
     or a service or project name that is not a mesh name`},
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if Converter == nil {
				return runHelper(cmd.Context(), env, convertHelper)
			}
			return runConvert(cmd.Context(), env, opts)
		},
	}
	f := cmd.Flags()
	f.StringArrayVarP(&opts.files, "file", "f", nil, "Compose file (repeatable: later files override earlier ones)")
	f.StringVar(&opts.module, "module", "", "module name (default: the Compose project's name)")
	f.StringArrayVar(&opts.profiles, "profile", nil, "Compose profile to enable (repeatable)")
	return cmd
}

func runConvert(ctx context.Context, env *Env, opts *convertOptions) error {
	file, notes, warnings, err := Converter(ctx, opts.files, opts.module, opts.profiles)
	for _, w := range warnings {
		env.Warnf("%s", w)
	}
	if err != nil {
		return err
	}
	if env.JSON() {
		// JSON has no comments, so the notes go to stderr.
		for _, name := range slices.Sorted(maps.Keys(notes)) {
			fmt.Fprintf(env.Stderr, "%s\n", notes[name])
		}
		return env.PrintJSON(file)
	}
	b, err := convertedYAML(file, notes)
	if err != nil {
		return err
	}
	// What is printed must be a mesh file this meshctl accepts. A value
	// Compose allows and meshctl refuses, such as a memory limit under 6m,
	// is named here, not at the first apply.
	if _, err := mesh.Decode("<converted>", b.Bytes()); err != nil {
		return err
	}
	_, err = env.Stdout.Write(b.Bytes())
	return err
}

// convertedYAML is file as YAML, each note a comment above its container.
func convertedYAML(file *mesh.File, notes map[string]string) (*bytes.Buffer, error) {
	var doc yaml.Node
	if err := doc.Encode(file); err != nil {
		return nil, err
	}
	for name, note := range notes {
		if key := containerKey(&doc, name); key != nil {
			key.HeadComment = note
		}
	}
	var b bytes.Buffer
	b.WriteString("# meshctl convert: check it, then meshctl apply -f\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return &b, nil
}

// containerKey is the key node of container name under
// modules.*.containers in doc, or nil. A converted file has one module.
func containerKey(doc *yaml.Node, name string) *yaml.Node {
	modules := mapValue(doc, "modules")
	if modules == nil {
		return nil
	}
	for i := 1; i < len(modules.Content); i += 2 {
		containers := mapValue(modules.Content[i], "containers")
		if containers == nil {
			continue
		}
		for j := 0; j+1 < len(containers.Content); j += 2 {
			if containers.Content[j].Value == name {
				return containers.Content[j]
			}
		}
	}
	return nil
}

// mapValue is the value of key in the mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
