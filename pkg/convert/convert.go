// Package convert turns a Compose project into a mesh module. It reads the
// project with compose-go (the library Compose itself uses: interpolation,
// .env, profiles, overrides, extends) and carries over every key it can;
// any other key is refused by name, never dropped.
package convert

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/compose-spec/compose-go/v2/cli"
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
	// Env is the environment for interpolation (os.Environ()); a .env
	// next to the first file is read too, as Compose does.
	Env []string
}

// RefusedError lists every key convert cannot carry over (exit 2).
type RefusedError struct{ Keys []string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("cannot carry over %d Compose key(s); nothing was converted (remove or rewrite them, then convert again):\n  %s",
		len(e.Keys), strings.Join(e.Keys, "\n  "))
}

// Fault says a refusal is bad input.
func (e *RefusedError) Fault() fault.Kind { return fault.BadInput }

// LoadError is a Compose file compose-go cannot load (exit 2).
type LoadError struct{ Err error }

func (e *LoadError) Error() string { return "compose file: " + e.Err.Error() }
func (e *LoadError) Unwrap() error { return e.Err }

// Fault says it is bad input.
func (e *LoadError) Fault() fault.Kind { return fault.BadInput }

// Project converts the Compose project of files (merged in order, with
// profiles enabled) into module, interpolating from this process's
// environment: what meshctl convert prints (it is cli.Converter in
// cmd/meshctl-convert).
func Project(ctx context.Context, files []string, module string, profiles []string) (*mesh.File, error) {
	f, _, err := Convert(ctx, Options{Files: files, Module: module, Profiles: profiles, Env: os.Environ()})
	return f, err
}

// Convert loads the project and returns the mesh file of one module.
func Convert(ctx context.Context, opts Options) (*mesh.File, string, error) {
	var popts []cli.ProjectOptionsFn
	if len(opts.Files) > 0 {
		// First: .env is read from the working directory.
		popts = append(popts, cli.WithWorkingDirectory(filepath.Dir(opts.Files[0])))
	}
	popts = append(popts,
		cli.WithEnv(opts.Env),
		cli.WithEnvFiles(), // .env in the working directory, as Compose
		cli.WithDotEnv,
		// Without files: COMPOSE_FILE, else compose.yaml (or
		// docker-compose.yml, …) in the working directory or above, as
		// Compose finds its project.
		cli.WithConfigFileEnv,
		cli.WithDefaultConfigPath,
		cli.WithProfiles(opts.Profiles),
		// env_file stays a file: its values are read at apply time, and
		// never printed here.
		cli.WithoutEnvironmentResolution,
	)
	po, err := cli.NewProjectOptions(opts.Files, popts...)
	if err != nil {
		return nil, "", &LoadError{err}
	}
	model, err := po.LoadModel(ctx)
	if err != nil {
		return nil, "", &LoadError{err}
	}
	project, err := po.LoadProject(ctx)
	if err != nil {
		return nil, "", &LoadError{err}
	}
	c := &converter{project: project, module: opts.Module}
	if c.module == "" {
		c.module = project.Name
	}
	if !mesh.ValidName(c.module) {
		c.refuse("name", "project name %q is not a module name (lower-case letters, digits, '-'); pass --module NAME", c.module)
	}
	c.checkModel(model)
	m := &mesh.Module{Containers: map[string]*mesh.Container{}}
	for _, name := range slices.Sorted(maps.Keys(project.Services)) {
		if ct := c.service(project.Services[name]); ct != nil {
			m.Containers[name] = ct
		}
	}
	if len(c.refused) > 0 {
		sort.Strings(c.refused)
		return nil, "", &RefusedError{Keys: slices.Compact(c.refused)}
	}
	return &mesh.File{Modules: map[string]*mesh.Module{c.module: m}}, c.module, nil
}

type converter struct {
	project *types.Project
	module  string
	refused []string
}

func (c *converter) refuse(path, format string, args ...any) {
	c.refused = append(c.refused, path+": "+fmt.Sprintf(format, args...))
}

// Keys a mesh file carries, by where they are in a Compose file.
var (
	topKeys     = set("name", "services", "volumes", "networks")
	serviceKeys = set("image", "command", "entrypoint", "environment", "env_file", "ports", "volumes",
		"network_mode", "networks", "restart", "labels", "pull_policy", "healthcheck", "depends_on",
		"stop_signal", "stop_grace_period", "user", "working_dir", "hostname", "init", "read_only", "tmpfs",
		"cap_add", "cap_drop", "mem_limit", "cpus", "pids_limit", "logging", "extra_hosts", "deploy", "profiles")
	healthKeys   = set("test", "interval", "timeout", "retries", "start_period", "disable")
	loggingKeys  = set("driver", "options")
	deployKeys   = set("resources")
	resourceKeys = set("limits")
	limitKeys    = set("cpus", "memory", "pids")
	dependsKeys  = set("condition", "required", "restart")
	portKeys     = set("target", "published", "host_ip", "protocol", "mode")
	volumeKeys   = set("type", "source", "target", "read_only", "bind", "volume", "tmpfs")
	tmpfsKeys    = set("size", "mode")
	bindKeys     = set("create_host_path")
	envFileKeys  = set("path", "required")
	topVolKeys   = set("name")
)

func set(keys ...string) map[string]bool {
	m := map[string]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// checkModel refuses, by path, every key of the raw model (the files as
// written, merged and interpolated) that has no place in a mesh file.
// x-* extensions are Compose's own "ignore me" and stay ignored.
func (c *converter) checkModel(model map[string]any) {
	c.keys("", model, topKeys)
	if vols, ok := model["volumes"].(map[string]any); ok {
		for name, v := range vols {
			if vm, ok := v.(map[string]any); ok {
				c.keys("volumes."+name, vm, topVolKeys)
			}
		}
	}
	if nets, ok := model["networks"].(map[string]any); ok {
		for name, v := range nets {
			vm, _ := v.(map[string]any)
			// Compose adds "default" (named PROJECT_default) itself.
			if _, named := vm["name"]; name != "default" || len(vm) > 1 || len(vm) == 1 && !named {
				c.refuse("networks."+name, "networks are not carried over: use network_mode (host, none) or the engine's default bridge")
			}
		}
	}
	services, _ := model["services"].(map[string]any)
	for name, s := range services {
		if _, enabled := c.project.Services[name]; !enabled {
			continue // not in the enabled profiles
		}
		sm, _ := s.(map[string]any)
		p := "services." + name
		c.keys(p, sm, serviceKeys)
		c.nested(p+".healthcheck", sm["healthcheck"], healthKeys)
		c.nested(p+".logging", sm["logging"], loggingKeys)
		if d, ok := sm["deploy"].(map[string]any); ok {
			c.keys(p+".deploy", d, deployKeys)
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
		if nets, ok := sm["networks"]; ok {
			ok := false
			switch n := nets.(type) {
			case []any:
				ok = len(n) == 1 && n[0] == "default"
			case map[string]any:
				_, hasDefault := n["default"]
				ok = len(n) == 1 && hasDefault && n["default"] == nil
			}
			if !ok {
				c.refuse(p+".networks", "networks are not carried over: use network_mode (host, none) or the engine's default bridge")
			}
		}
	}
}

func (c *converter) keys(path string, m map[string]any, allowed map[string]bool) {
	for k := range m {
		if strings.HasPrefix(k, "x-") || allowed[k] {
			continue
		}
		c.refuse(join(path, k), "not carried over by meshctl")
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

// service converts one service; the refusals it finds are recorded.
func (c *converter) service(s types.ServiceConfig) *mesh.Container {
	p := "services." + s.Name
	if !mesh.ValidName(s.Name) {
		c.refuse(p, "service name %q is not a container name (lower-case letters, digits, '-'); rename the service", s.Name)
	}
	ct := &mesh.Container{Image: s.Image, Labels: map[string]string(s.Labels)}
	if s.Image == "" {
		c.refuse(p+".image", "is missing: meshctl runs images, it does not build them (build: an image first, and name it)")
	}
	if s.Entrypoint != nil {
		if len(s.Entrypoint) == 0 {
			c.refuse(p+".entrypoint", "an empty entrypoint (clearing the image's) is not carried over: write entrypoint: [] in the mesh file")
		}
		ct.Entrypoint = []string(s.Entrypoint)
	}
	if len(s.Command) > 0 {
		ct.Command = []string(s.Command)
	}
	for k, v := range s.Environment {
		if v == nil {
			c.refuse(p+".environment."+k, "has no value (Compose takes it from the shell that runs it; a window's close from cron would not have it): give the value, or put it in an env_file")
			continue
		}
		if ct.Env == nil {
			ct.Env = map[string]string{}
		}
		ct.Env[k] = *v
	}
	for i, f := range s.EnvFiles {
		if !bool(f.Required) {
			c.refuse(fmt.Sprintf("%s.env_file[%d].required", p, i), "an optional env_file is not carried over: a missing env-file is an error in meshctl")
		}
		ct.EnvFile = append(ct.EnvFile, f.Path)
	}
	for i, port := range s.Ports {
		ct.Ports = append(ct.Ports, c.port(fmt.Sprintf("%s.ports[%d]", p, i), port))
	}
	for i, v := range s.Volumes {
		c.volume(fmt.Sprintf("%s.volumes[%d]", p, i), v, ct)
	}
	switch s.NetworkMode {
	case "":
	case "host", "none", "bridge":
		ct.Network = s.NetworkMode
	default:
		c.refuse(p+".network_mode", "%q is not carried over: use host, none or bridge", s.NetworkMode)
	}
	switch r := s.Restart; {
	case r == "" || r == "no" || r == "always" || r == "unless-stopped" || r == "on-failure":
		ct.Restart = r
		if r == "" {
			ct.Restart = "no" // Compose's default, not meshctl's
		}
	default:
		c.refuse(p+".restart", "%q is not carried over: use no, always, unless-stopped or on-failure", r)
	}
	switch s.PullPolicy {
	case "", "missing", "if_not_present":
	case "always", "never":
		ct.Pull = s.PullPolicy
	default:
		c.refuse(p+".pull_policy", "%q is not carried over: use missing, always or never", s.PullPolicy)
	}
	if h := s.HealthCheck; h != nil {
		hc := &mesh.Healthcheck{Test: mesh.HealthTest(h.Test), Disable: h.Disable,
			Interval: dur(h.Interval), Timeout: dur(h.Timeout), StartPeriod: dur(h.StartPeriod)}
		if h.Retries != nil {
			hc.Retries = int(*h.Retries)
		}
		if h.Disable {
			hc.Test = nil
		}
		ct.Healthcheck = hc
	}
	for _, dn := range slices.Sorted(maps.Keys(s.DependsOn)) {
		switch d := s.DependsOn[dn]; d.Condition {
		case "", types.ServiceConditionStarted, types.ServiceConditionHealthy:
			// meshctl waits for a dependency to be healthy, whatever the condition.
			ct.DependsOn = append(ct.DependsOn, dn)
		default:
			c.refuse(p+".depends_on."+dn+".condition", "%q is not carried over: meshctl waits for dependencies to run and be healthy", d.Condition)
		}
	}
	ct.StopSignal = s.StopSignal
	ct.StopGracePeriod = dur(s.StopGracePeriod)
	ct.User, ct.WorkingDir, ct.Hostname = s.User, s.WorkingDir, s.Hostname
	if s.Init != nil {
		ct.Init = *s.Init
	}
	ct.ReadOnly = s.ReadOnly
	ct.Tmpfs = append(ct.Tmpfs, s.Tmpfs...)
	ct.CapAdd, ct.CapDrop = s.CapAdd, s.CapDrop
	mem, cpus, pids := int64(s.MemLimit), float64(s.CPUS), s.PidsLimit
	if s.Deploy != nil && s.Deploy.Resources.Limits != nil {
		l := s.Deploy.Resources.Limits
		if l.MemoryBytes > 0 {
			mem = int64(l.MemoryBytes)
		}
		if l.NanoCPUs > 0 {
			cpus = float64(l.NanoCPUs)
		}
		if l.Pids > 0 {
			pids = l.Pids
		}
	}
	if mem > 0 {
		ct.Memory = memory(mem)
	}
	ct.CPUs = math.Round(cpus*1000) / 1000
	ct.PidsLimit = pids
	if s.Logging != nil {
		ct.Logging = &mesh.Logging{Driver: s.Logging.Driver, Options: map[string]string(s.Logging.Options)}
	}
	for _, host := range slices.Sorted(maps.Keys(s.ExtraHosts)) {
		for _, ip := range s.ExtraHosts[host] {
			ct.ExtraHosts = append(ct.ExtraHosts, host+":"+ip)
		}
	}
	if len(ct.Labels) == 0 {
		ct.Labels = nil
	}
	return ct
}

func (c *converter) port(path string, p types.ServicePortConfig) string {
	if p.Mode != "" && p.Mode != "ingress" && p.Mode != "host" {
		c.refuse(path+".mode", "%q is not carried over", p.Mode)
	}
	s := strconv.FormatUint(uint64(p.Target), 10)
	if p.Published != "" {
		s = p.Published + ":" + s
		if p.HostIP != "" {
			s = p.HostIP + ":" + s
		}
	} else if p.HostIP != "" {
		s = p.HostIP + "::" + s
	}
	if p.Protocol != "" && p.Protocol != "tcp" {
		s += "/" + p.Protocol
	}
	return s
}

func (c *converter) volume(path string, v types.ServiceVolumeConfig, ct *mesh.Container) {
	mode := ""
	if v.ReadOnly {
		mode = ":ro"
	}
	switch v.Type {
	case types.VolumeTypeBind:
		if v.Bind != nil && (v.Bind.Propagation != "" && v.Bind.Propagation != "rprivate" || v.Bind.SELinux != "" || v.Bind.Recursive != "") {
			c.refuse(path+".bind", "bind options (propagation, selinux, recursive) are not carried over")
		}
		ct.Volumes = append(ct.Volumes, v.Source+":"+v.Target+mode)
	case types.VolumeTypeVolume:
		if v.Volume != nil && (v.Volume.NoCopy || v.Volume.Subpath != "" || len(v.Volume.Labels) > 0) {
			c.refuse(path+".volume", "volume options (nocopy, subpath, labels) are not carried over")
		}
		if v.Source == "" {
			c.refuse(path, "an anonymous volume is not carried over: name it (NAME:%s)", v.Target)
			return
		}
		name := v.Source
		if tv, ok := c.project.Volumes[v.Source]; ok {
			if tv.External {
				c.refuse("volumes."+v.Source+".external", "not carried over")
			}
			if tv.Driver != "" && tv.Driver != "local" || len(tv.DriverOpts) > 0 || len(tv.Labels) > 0 {
				c.refuse("volumes."+v.Source, "a volume with a driver, options or labels is not carried over")
			}
			if tv.Name != "" {
				// The name Compose gave it (PROJECT_NAME): the data stays.
				name = tv.Name
			}
		}
		ct.Volumes = append(ct.Volumes, name+":"+v.Target+mode)
	case types.VolumeTypeTmpfs:
		opts := []string{}
		if v.Tmpfs != nil && v.Tmpfs.Size > 0 {
			opts = append(opts, "size="+strconv.FormatInt(int64(v.Tmpfs.Size), 10))
		}
		if v.Tmpfs != nil && v.Tmpfs.Mode != 0 {
			opts = append(opts, fmt.Sprintf("mode=%o", v.Tmpfs.Mode))
		}
		t := v.Target
		if len(opts) > 0 {
			t += ":" + strings.Join(opts, ",")
		}
		ct.Tmpfs = append(ct.Tmpfs, t)
	default:
		c.refuse(path+".type", "%q is not carried over", v.Type)
	}
}

func dur(d *types.Duration) mesh.Duration {
	if d == nil || *d <= 0 {
		return 0
	}
	return mesh.Duration(time.Duration(*d))
}

// memory writes bytes as the largest unit that divides it: 512m, 2g.
func memory(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"g", 1 << 30}, {"m", 1 << 20}, {"k", 1 << 10}} {
		if b%u.size == 0 {
			return strconv.FormatInt(b/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10) + "b"
}
