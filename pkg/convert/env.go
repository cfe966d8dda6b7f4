package convert

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/template"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// Compose takes a value from the shell that runs it in two ways. One is an
// environment entry without a value, like `- API_TOKEN`. The other is ${X}.
//
// meshctl never writes a value from the shell into a mesh file. That file is
// kept in a repository and printed in reviews. So an environment entry whose
// value would come from the shell is refused. The refusal says to carry it in
// an env_file, which is read at apply time and never printed.
//
// A ${X} from .env is written as Compose reads it. So is one the shell does
// not set, with its default if any. So is ${X} outside environment, such as
// an image tag or a port.

// shellEnvironment refuses each entry of env whose value would come from the
// shell. It also refuses each entry without a value at all. env is a
// service's environment in the raw model, at path. shell holds the names the
// process environment sets.
func (c *converter) shellEnvironment(path string, env any, shell map[string]bool) {
	for key, value := range rawEnvironment(env) {
		p := path + "." + key
		if value == nil {
			if shell[key] {
				c.refused.add(p, "takes its value from the shell, and meshctl never writes a value from the shell into a mesh file: "+
					"put %s=… in an env_file (mode 600) and name it under env_file:", key)
			} else {
				c.refused.add(p, "has no value (Compose takes it from the shell that runs it; a window's close from cron would not have it): "+
					"give the value, or put %s=… in an env_file", key)
			}
			continue
		}
		for _, name := range variables(*value) {
			if shell[name] {
				c.refused.add(p, "takes ${%s} from the shell, and meshctl never writes a value from the shell into a mesh file: "+
					"put %s=… in an env_file (mode 600) and name it under env_file:, or in .env if it is no secret", name, key)
				break
			}
		}
	}
}

// environment carries s's environment and its env_file, kept as files. It
// leaves out the entries checkModel refused, those with no value or one from
// the shell.
func (c *converter) environment(path string, s types.ServiceConfig, ct *mesh.Container) {
	for k, v := range s.Environment {
		if v == nil || c.refused.has(path+".environment."+k) {
			continue
		}
		if ct.Env == nil {
			ct.Env = map[string]string{}
		}
		ct.Env[k] = *v
	}
	for i, f := range s.EnvFiles {
		if !bool(f.Required) {
			c.refused.add(fmt.Sprintf("%s.env_file[%d].required", path, i), "an optional env_file is not carried over: a missing "+
				"env-file is an error in meshctl; remove required: false and create the file (it may be empty)")
		}
		ct.EnvFile = append(ct.EnvFile, relative(f.Path))
	}
}

// rawEnvironment is a raw model's environment by key. The model holds
// Compose's list of KEY=VALUE or KEY, or a map. A nil value is a KEY without
// one.
func rawEnvironment(env any) map[string]*string {
	out := map[string]*string{}
	switch env := env.(type) {
	case []any:
		for _, e := range env {
			s := fmt.Sprint(e)
			if k, v, ok := strings.Cut(s, "="); ok {
				out[k] = &v
			} else {
				out[s] = nil
			}
		}
	case map[string]any:
		for k, v := range env {
			if v == nil {
				out[k] = nil
			} else {
				s := fmt.Sprint(v)
				out[k] = &s
			}
		}
	}
	return out
}

// variables are the names a Compose value interpolates, sorted.
func variables(s string) []string {
	return slices.Sorted(maps.Keys(template.ExtractVariables(map[string]any{"v": s}, nil)))
}

// envNames are the names set in env (KEY=VALUE entries).
func envNames(env []string) map[string]bool {
	names := map[string]bool{}
	for _, e := range env {
		if k, _, ok := strings.Cut(e, "="); ok && k != "" {
			names[k] = true
		}
	}
	return names
}

// relative writes path relative to the working directory. compose-go made it
// absolute, from the project's directory. The output is meant to be saved in
// the working directory (meshctl convert > mesh.yaml) or applied from it
// (meshctl convert | meshctl apply -f -). A mesh file's relative path is read
// from its own directory. So the file stays usable in any checkout.
func relative(path string) string {
	wd, err := os.Getwd()
	if err != nil || !filepath.IsAbs(path) {
		return path
	}
	if rel, err := filepath.Rel(wd, path); err == nil {
		return rel
	}
	return path
}
