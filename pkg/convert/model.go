package convert

import (
	"fmt"
	"strings"
)

// Keys a mesh file carries, by where they are in a Compose file.
var (
	// version is obsolete, and compose-go's warning says so (load.go).
	topKeys     = set("name", "version", "services", "volumes", "networks", "secrets", "configs")
	serviceKeys = set("image", "build", "command", "entrypoint", "environment", "env_file", "ports", "volumes",
		"network_mode", "networks", "restart", "labels", "pull_policy", "healthcheck", "depends_on",
		"stop_signal", "stop_grace_period", "user", "working_dir", "hostname", "init", "read_only", "tmpfs",
		"cap_add", "cap_drop", "mem_limit", "cpus", "pids_limit", "logging", "extra_hosts", "deploy", "profiles",
		"secrets", "configs", "expose", "sysctls", "ulimits", "privileged", "stdin_open", "tty", "dns", "container_name")
	healthKeys  = set("test", "interval", "timeout", "retries", "start_period", "disable")
	loggingKeys = set("driver", "options")
	deployKeys  = set("resources", "restart_policy", "update_config")
	// Outside Swarm, only the order means something to meshctl.
	updateConfigKeys = set("order")
	// Compose itself uses only the condition and max_attempts outside Swarm.
	// meshctl has no limit of attempts.
	restartPolicyKeys = set("condition")
	resourceKeys      = set("limits")
	limitKeys         = set("cpus", "memory", "pids")
	dependsKeys       = set("condition", "required", "restart")
	portKeys          = set("target", "published", "host_ip", "protocol", "mode")
	volumeKeys        = set("type", "source", "target", "read_only", "bind", "volume", "tmpfs")
	tmpfsKeys         = set("size", "mode")
	bindKeys          = set("create_host_path")
	envFileKeys       = set("path", "required")
	// A service's reference to a secret or config. uid, gid and mode are
	// ignored outside Swarm, and a warning says so (secrets.go).
	fileRefKeys = set("source", "target", "uid", "gid", "mode")
	// A top-level secret or config. Its file is carried. Its environment,
	// external and content are refused where a service uses them
	// (secrets.go).
	fileObjKeys = set("name", "file", "environment", "external", "content")
	ulimitKeys  = set("soft", "hard")
	// A top-level volume's driver, options, labels and external are
	// judged by volume(), where a service uses it.
	topVolKeys = set("name", "driver", "driver_opts", "labels", "external")
)

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// checkModel refuses every key of the raw model that has no place in a mesh
// file, by path. The raw model is the files as written, merged. It also
// refuses every environment value it would take from the shell. x-*
// extensions are Compose's own "ignore me" and stay ignored.
func (c *converter) checkModel(model map[string]any) {
	c.keys("", model, topKeys)
	if vols, ok := model["volumes"].(map[string]any); ok {
		for name, v := range vols {
			c.nested("volumes."+name, v, topVolKeys)
		}
	}
	c.checkNetworks(model["networks"])
	for _, kind := range []string{"secrets", "configs"} {
		if objs, ok := model[kind].(map[string]any); ok {
			for name, v := range objs {
				c.nested(kind+"."+name, v, fileObjKeys)
			}
		}
	}
	services, _ := model["services"].(map[string]any)
	for name, s := range services {
		if _, enabled := c.project.Services[name]; enabled { // else not in the enabled profiles
			sm, _ := s.(map[string]any)
			c.checkService(name, sm)
		}
	}
}

func (c *converter) checkService(name string, sm map[string]any) {
	p := "services." + name
	c.keys(p, sm, serviceKeys)
	c.nested(p+".healthcheck", sm["healthcheck"], healthKeys)
	c.nested(p+".logging", sm["logging"], loggingKeys)
	if d, ok := sm["deploy"].(map[string]any); ok {
		c.keys(p+".deploy", d, deployKeys)
		c.nested(p+".deploy.restart_policy", d["restart_policy"], restartPolicyKeys)
		c.nested(p+".deploy.update_config", d["update_config"], updateConfigKeys)
		if r, ok := d["resources"].(map[string]any); ok {
			c.keys(p+".deploy.resources", r, resourceKeys)
			c.nested(p+".deploy.resources.limits", r["limits"], limitKeys)
		}
	}
	if deps, ok := sm["depends_on"].(map[string]any); ok {
		for dn, dv := range deps {
			c.nested(p+".depends_on."+dn, dv, dependsKeys)
		}
	}
	c.list(p+".ports", sm["ports"], portKeys)
	c.list(p+".env_file", sm["env_file"], envFileKeys)
	c.list(p+".secrets", sm["secrets"], fileRefKeys)
	c.list(p+".configs", sm["configs"], fileRefKeys)
	if ul, ok := sm["ulimits"].(map[string]any); ok {
		for n, u := range ul {
			c.nested(p+".ulimits."+n, u, ulimitKeys)
		}
	}
	if vols, ok := sm["volumes"].([]any); ok {
		for i, v := range vols {
			if vm, ok := v.(map[string]any); ok {
				vp := fmt.Sprintf("%s.volumes[%d]", p, i)
				c.keys(vp, vm, volumeKeys)
				c.nested(vp+".bind", vm["bind"], bindKeys)
				c.nested(vp+".volume", vm["volume"], nil)
				c.nested(vp+".tmpfs", vm["tmpfs"], tmpfsKeys)
			}
		}
	}
	c.checkServiceNetworks(p+".networks", sm["networks"])
	c.shellEnvironment(p+".environment", sm["environment"], c.shell)
}

// keys refuses each key of m not allowed at path, with its reason and next
// step.
func (c *converter) keys(path string, m map[string]any, allowed map[string]bool) {
	service, container := "", ""
	if rest, ok := strings.CutPrefix(path, "services."); ok {
		service, _, _ = strings.Cut(rest, ".")
		container = c.module + "." + service
	}
	for k := range m {
		if strings.HasPrefix(k, "x-") || allowed[k] {
			continue
		}
		c.refused.add(join(path, k), "%s", notCarried(k, service, container))
	}
}

func (c *converter) nested(path string, v any, allowed map[string]bool) {
	if m, ok := v.(map[string]any); ok {
		c.keys(path, m, allowed)
	}
}

func (c *converter) list(path string, v any, allowed map[string]bool) {
	if l, ok := v.([]any); ok {
		for i, e := range l {
			c.nested(fmt.Sprintf("%s[%d]", path, i), e, allowed)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
