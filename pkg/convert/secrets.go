package convert

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// Compose's secrets and configs outside Swarm are files bound read-only into
// the container. A secret goes to /run/secrets/SOURCE, or to its target,
// under /run/secrets when relative. A config goes to /SOURCE, or to /TARGET.
//
// Those with a file become the mesh file's secrets and configs. The file is
// written relative to the output, as env_file is. Three kinds are refused,
// each saying how to make it a file. They are one that takes its value from
// the environment, an external one (Swarm's) and inline content.

// fileMounts carries s's secrets and configs onto ct.
func (c *converter) fileMounts(path string, s types.ServiceConfig, ct *mesh.Container) {
	for i, r := range s.Secrets {
		p := fmt.Sprintf("%s.secrets[%d]", path, i)
		if m, ok := c.fileMount(p, "secret", types.FileReferenceConfig(r), types.FileObjectConfig(c.project.Secrets[r.Source])); ok {
			ct.Secrets = append(ct.Secrets, m)
		}
	}
	for i, r := range s.Configs {
		p := fmt.Sprintf("%s.configs[%d]", path, i)
		if m, ok := c.fileMount(p, "config", types.FileReferenceConfig(r), types.FileObjectConfig(c.project.Configs[r.Source])); ok {
			if m.Target != "" && !strings.HasPrefix(m.Target, "/") {
				m.Target = "/" + m.Target // Compose's: a config's relative target is from /
			}
			ct.Configs = append(ct.Configs, m)
		}
	}
}

// fileMount is the mount of r, a reference at path to the top-level secret or
// config def. kind says which. It returns false when the mount is refused.
func (c *converter) fileMount(path, kind string, r types.FileReferenceConfig, def types.FileObjectConfig) (mesh.FileMount, bool) {
	top := kind + "s." + r.Source
	switch {
	case bool(def.External):
		c.refused.add(top+".external", "an external %s is Swarm's, which meshctl (like Compose outside Swarm) does not use: "+
			"write it to a file (mode 600) and give file: instead", kind)
		return mesh.FileMount{}, false
	case def.Environment != "":
		c.refused.add(top+".environment", "takes its value from the environment variable %s, and meshctl never writes a value "+
			"from the shell into a mesh file: write it to a file (mode 600) and give file: instead", def.Environment)
		return mesh.FileMount{}, false
	case def.Content != "":
		c.refused.add(top+".content", "inline content is not carried over: put it in a file next to the Compose file and give file: instead")
		return mesh.FileMount{}, false
	case def.File == "":
		c.refused.add(path, "%s %q is not defined with file: at the top level: define it (%ss: {%s: {file: ./FILE}})", kind, r.Source, kind, r.Source)
		return mesh.FileMount{}, false
	}
	if r.UID != "" || r.GID != "" || r.Mode != nil {
		c.warnings = append(c.warnings, fmt.Sprintf("%s: uid, gid and mode are ignored, as Compose ignores them outside Swarm: "+
			"the container sees the file with its owner and mode on the host (chgrp and chmod 640 it for a container user of its group)", path))
	}
	m := mesh.FileMount{Name: r.Source, File: relative(def.File), Target: r.Target}
	if kind == "secret" && m.Target == mesh.SecretDir+"/"+r.Source || kind == "config" && m.Target == "/"+r.Source {
		m.Target = "" // the default, which compose-go writes out
	}
	if filepath.Base(def.File) == r.Source {
		m.Name = "" // the file's own name: say it once
	}
	return m, true
}
