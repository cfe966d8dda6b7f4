package mesh

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/docker/go-units"
	"go.yaml.in/yaml/v3"
)

// ContainerFields are the fields a container takes beyond its image,
// command, env, volumes, network, ports, restart and labels, with Compose's
// meaning and kebab-case spelling. Each is optional; its zero value is the
// default, which is what a spec recorded before the field existed reads as.
type ContainerFields struct {
	// Healthcheck is the probe a new container must pass before it replaces
	// the old one; nil leaves the image's (if any).
	Healthcheck *Healthcheck `yaml:"healthcheck,omitempty" json:"healthcheck,omitempty"`
	// DependsOn names containers ("name" in this module, "module.name" in
	// another) that are converged, and healthy, before this one.
	DependsOn []string `yaml:"depends-on,omitempty" json:"depends-on,omitempty"`
	// StopSignal is what every stop meshctl makes sends first: default
	// SIGTERM (or the image's STOPSIGNAL).
	StopSignal string `yaml:"stop-signal,omitempty" json:"stop-signal,omitempty"`
	// StopGracePeriod is how long a stop waits before SIGKILL: default 10s.
	StopGracePeriod Duration `yaml:"stop-grace-period,omitempty" json:"stop-grace-period,omitempty"`
	User            string   `yaml:"user,omitempty" json:"user,omitempty"`
	WorkingDir      string   `yaml:"working-dir,omitempty" json:"working-dir,omitempty"`
	Hostname        string   `yaml:"hostname,omitempty" json:"hostname,omitempty"`
	Init            bool     `yaml:"init,omitempty" json:"init,omitempty"`
	ReadOnly        bool     `yaml:"read-only,omitempty" json:"read-only,omitempty"`
	// Tmpfs mounts are "/path" or "/path:options" (size=64m,mode=1777).
	Tmpfs   []string `yaml:"tmpfs,omitempty" json:"tmpfs,omitempty"`
	CapAdd  []string `yaml:"cap-add,omitempty" json:"cap-add,omitempty"`
	CapDrop []string `yaml:"cap-drop,omitempty" json:"cap-drop,omitempty"`
	// Memory is a limit such as "512m" or "2g" (at least 6m).
	Memory    string   `yaml:"memory,omitempty" json:"memory,omitempty"`
	CPUs      float64  `yaml:"cpus,omitempty" json:"cpus,omitempty"`
	PidsLimit int64    `yaml:"pids-limit,omitempty" json:"pids-limit,omitempty"`
	Logging   *Logging `yaml:"logging,omitempty" json:"logging,omitempty"`
	// ExtraHosts are "host:ip" lines added to /etc/hosts.
	ExtraHosts []string `yaml:"extra-hosts,omitempty" json:"extra-hosts,omitempty"`
	// EnvFile names files of KEY=VALUE lines, read at apply time (absolute
	// once loaded: a relative path is from the mesh file's directory).
	// A variable in env wins over one in a file, a later file over an
	// earlier one.
	EnvFile StringOrList `yaml:"env-file,omitempty" json:"env-file,omitempty"`
}

// Healthcheck is a container's probe, as Compose's healthcheck.
type Healthcheck struct {
	// Test is ["CMD", prog, args…], ["CMD-SHELL", "command"] or ["NONE"];
	// a plain string is a CMD-SHELL command.
	Test        HealthTest `yaml:"test,omitempty" json:"test,omitempty"`
	Interval    Duration   `yaml:"interval,omitempty" json:"interval,omitempty"`
	Timeout     Duration   `yaml:"timeout,omitempty" json:"timeout,omitempty"`
	Retries     int        `yaml:"retries,omitempty" json:"retries,omitempty"`
	StartPeriod Duration   `yaml:"start-period,omitempty" json:"start-period,omitempty"`
	// Disable turns off the image's healthcheck.
	Disable bool `yaml:"disable,omitempty" json:"disable,omitempty"`
}

// Logging is a container's log driver and its options.
type Logging struct {
	Driver  string            `yaml:"driver,omitempty" json:"driver,omitempty"`
	Options map[string]string `yaml:"options,omitempty" json:"options,omitempty"`
}

// Healthcheck defaults, the engine's.
const (
	DefaultHealthInterval = 30 * time.Second
	DefaultHealthTimeout  = 30 * time.Second
	DefaultHealthRetries  = 3
	// DefaultStopGracePeriod is how long a stop waits before it kills.
	DefaultStopGracePeriod = 10 * time.Second
	// MinMemory is the engine's smallest memory limit.
	MinMemory = 6 << 20
)

// HealthTest is a healthcheck's test: a YAML string is a CMD-SHELL command.
type HealthTest []string

// UnmarshalYAML reads a string (CMD-SHELL) or a list.
func (t *HealthTest) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		*t = HealthTest{"CMD-SHELL", n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*t = l
	return nil
}

// StringOrList is a list of strings that the file may write as one string.
type StringOrList []string

// UnmarshalYAML reads a string or a list of strings.
func (s *StringOrList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		*s = StringOrList{n.Value}
		return nil
	}
	var l []string
	if err := n.Decode(&l); err != nil {
		return err
	}
	*s = l
	return nil
}

// StopGrace returns the container's stop grace period, 10s when unset.
func (c *Container) StopGrace() time.Duration {
	if c.StopGracePeriod == 0 {
		return DefaultStopGracePeriod
	}
	return c.StopGracePeriod.Std()
}

// MemoryBytes returns the memory limit in bytes, 0 when unset.
func (c *Container) MemoryBytes() int64 {
	if c.Memory == "" {
		return 0
	}
	n, err := units.RAMInBytes(c.Memory)
	if err != nil {
		return 0 // validated at decode
	}
	return n
}

// EnvFileError is an env-file that cannot be read at apply time (exit 2).
type EnvFileError struct {
	Container, Path string
	Err             error
}

func (e *EnvFileError) Error() string {
	return fmt.Sprintf("container %s: env-file %s: %v", e.Container, e.Path, e.Err)
}

// Fault says an unreadable env-file is bad input.
func (e *EnvFileError) Fault() fault.Kind { return fault.BadInput }

// Unwrap returns the cause.
func (e *EnvFileError) Unwrap() error { return e.Err }

// LoadEnv returns the container's environment: its env-files read now, in
// order, with env over them. name names the container in errors. Values
// are never put in an error.
func (c *Container) LoadEnv(name string) (map[string]string, error) {
	if len(c.EnvFile) == 0 {
		return c.Env, nil
	}
	env := map[string]string{}
	for _, p := range c.EnvFile {
		data, err := os.ReadFile(p)
		if err != nil {
			var cause error = err
			if pe, ok := err.(*os.PathError); ok {
				cause = pe.Err
			}
			return nil, &EnvFileError{Container: name, Path: p, Err: cause}
		}
		vars, err := parseEnvFile(data)
		if err != nil {
			return nil, &EnvFileError{Container: name, Path: p, Err: err}
		}
		maps.Copy(env, vars)
	}
	maps.Copy(env, c.Env)
	return env, nil
}

// parseEnvFile reads KEY=VALUE lines; blank lines and lines starting with
// # are skipped, "export " is allowed, a value may be quoted.
func parseEnvFile(data []byte) (map[string]string, error) {
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		s = strings.TrimPrefix(s, "export ")
		k, v, ok := strings.Cut(s, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" || strings.IndexFunc(k, badKeyRune) >= 0 {
			// The line is not quoted: it may hold a secret.
			return nil, fmt.Errorf("line %d: not KEY=VALUE", line)
		}
		if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
			v = v[1 : len(v)-1]
		}
		out[k] = v
	}
	return out, sc.Err()
}

// absEnvFiles makes the env-file paths of f absolute, from dir.
func (f *File) absEnvFiles(dir string) {
	for _, m := range f.Modules {
		if m == nil {
			continue
		}
		for _, c := range m.Containers {
			if c == nil {
				continue
			}
			for i, p := range c.EnvFile {
				if p != "" && !filepath.IsAbs(p) {
					c.EnvFile[i] = filepath.Join(dir, p)
				}
			}
		}
	}
}

// SpecFields is the part of a Spec that the container fields make. Every
// zero value is the default, so a spec recorded before a field existed
// reads as that field's default.
type SpecFields struct {
	Health          *SpecHealth       `json:"health,omitempty"`
	StopSignal      string            `json:"stop_signal,omitempty"`
	StopGracePeriod time.Duration     `json:"stop_grace,omitempty"`
	User            string            `json:"user,omitempty"`
	WorkingDir      string            `json:"working_dir,omitempty"`
	Hostname        string            `json:"hostname,omitempty"`
	Init            bool              `json:"init,omitempty"`
	ReadOnly        bool              `json:"read_only,omitempty"`
	Tmpfs           []string          `json:"tmpfs,omitempty"`
	CapAdd          []string          `json:"cap_add,omitempty"`
	CapDrop         []string          `json:"cap_drop,omitempty"`
	Memory          int64             `json:"memory,omitempty"`
	NanoCPUs        int64             `json:"nano_cpus,omitempty"`
	PidsLimit       int64             `json:"pids_limit,omitempty"`
	LogDriver       string            `json:"log_driver,omitempty"`
	LogOptions      map[string]string `json:"log_options,omitempty"`
	ExtraHosts      []string          `json:"extra_hosts,omitempty"`
}

// SpecHealth is a healthcheck in canonical form: Test ["NONE"] disables
// the image's; durations and retries have their defaults filled in.
type SpecHealth struct {
	Test        []string      `json:"test"`
	Interval    time.Duration `json:"interval,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	Retries     int           `json:"retries,omitempty"`
	StartPeriod time.Duration `json:"start_period,omitempty"`
}

func (c *Container) specFields() SpecFields {
	s := SpecFields{
		StopSignal:      c.StopSignal,
		StopGracePeriod: c.StopGracePeriod.Std(),
		User:            c.User,
		WorkingDir:      c.WorkingDir,
		Hostname:        c.Hostname,
		Init:            c.Init,
		ReadOnly:        c.ReadOnly,
		Tmpfs:           slices.Clone(c.Tmpfs),
		CapAdd:          slices.Clone(c.CapAdd),
		CapDrop:         slices.Clone(c.CapDrop),
		Memory:          c.MemoryBytes(),
		NanoCPUs:        int64(math.Round(c.CPUs * 1e9)),
		PidsLimit:       c.PidsLimit,
		ExtraHosts:      slices.Clone(c.ExtraHosts),
	}
	if h := c.Healthcheck; h != nil {
		s.Health = &SpecHealth{Test: slices.Clone([]string(h.Test)), Interval: h.Interval.Std(),
			Timeout: h.Timeout.Std(), Retries: h.Retries, StartPeriod: h.StartPeriod.Std()}
		if h.Disable {
			s.Health = &SpecHealth{Test: []string{"NONE"}}
		}
	}
	if c.Logging != nil {
		s.LogDriver, s.LogOptions = c.Logging.Driver, maps.Clone(c.Logging.Options)
	}
	return s
}

func (s SpecFields) normalize() SpecFields {
	s.StopSignal = normSignal(s.StopSignal)
	if s.StopSignal == "SIGTERM" {
		s.StopSignal = ""
	}
	if s.StopGracePeriod == DefaultStopGracePeriod {
		s.StopGracePeriod = 0
	}
	if h := s.Health; h != nil {
		c := *h
		if len(c.Test) > 0 && c.Test[0] == "NONE" {
			c = SpecHealth{Test: []string{"NONE"}}
		} else {
			c.Test = slices.Clone(c.Test)
			if c.Interval == 0 {
				c.Interval = DefaultHealthInterval
			}
			if c.Timeout == 0 {
				c.Timeout = DefaultHealthTimeout
			}
			if c.Retries == 0 {
				c.Retries = DefaultHealthRetries
			}
		}
		s.Health = &c
	}
	s.Tmpfs = sortedOrNil(s.Tmpfs)
	s.CapAdd = sortedOrNil(normCaps(s.CapAdd))
	s.CapDrop = sortedOrNil(normCaps(s.CapDrop))
	hosts := make([]string, 0, len(s.ExtraHosts))
	for _, h := range s.ExtraHosts {
		hosts = append(hosts, normHost(h))
	}
	s.ExtraHosts = sortedOrNil(hosts)
	if len(s.LogOptions) == 0 {
		s.LogOptions = nil
	}
	return s
}

// diffFields names the container fields in which have differs from want.
func diffFields(have, want SpecFields) []string {
	var d []string
	add := func(name string, differs bool) {
		if differs {
			d = append(d, name)
		}
	}
	add("healthcheck", !sameHealth(have.Health, want.Health))
	add("stop-signal", have.StopSignal != want.StopSignal)
	add("stop-grace-period", have.StopGracePeriod != want.StopGracePeriod)
	add("user", have.User != want.User)
	add("working-dir", have.WorkingDir != want.WorkingDir)
	add("hostname", have.Hostname != want.Hostname)
	add("init", have.Init != want.Init)
	add("read-only", have.ReadOnly != want.ReadOnly)
	add("tmpfs", !slices.Equal(have.Tmpfs, want.Tmpfs))
	add("cap-add", !slices.Equal(have.CapAdd, want.CapAdd))
	add("cap-drop", !slices.Equal(have.CapDrop, want.CapDrop))
	add("memory", have.Memory != want.Memory)
	add("cpus", have.NanoCPUs != want.NanoCPUs)
	add("pids-limit", have.PidsLimit != want.PidsLimit)
	add("logging", have.LogDriver != want.LogDriver || !maps.Equal(have.LogOptions, want.LogOptions))
	add("extra-hosts", !slices.Equal(have.ExtraHosts, want.ExtraHosts))
	return d
}

func sameHealth(a, b *SpecHealth) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Test, b.Test) && a.Interval == b.Interval && a.Timeout == b.Timeout &&
		a.Retries == b.Retries && a.StartPeriod == b.StartPeriod
}

// normSignal writes a signal as "SIGTERM" (a number stays a number).
func normSignal(s string) string {
	if s == "" {
		return ""
	}
	if _, err := strconv.Atoi(s); err == nil {
		return s
	}
	s = strings.ToUpper(s)
	if !strings.HasPrefix(s, "SIG") {
		s = "SIG" + s
	}
	return s
}

func normCaps(l []string) []string {
	out := make([]string, 0, len(l))
	for _, c := range l {
		c = strings.ToUpper(c)
		if c != "ALL" && !strings.HasPrefix(c, "CAP_") {
			c = "CAP_" + c
		}
		out = append(out, c)
	}
	return out
}

// normHost writes an extra host as the engine does: "host:ip".
func normHost(h string) string {
	if name, ip, ok := strings.Cut(h, "="); ok {
		return name + ":" + ip
	}
	return h
}

var (
	signalRE   = regexp.MustCompile(`^(?i:(SIG)?[A-Z][A-Z0-9+-]*|[0-9]{1,2})$`)
	capRE      = regexp.MustCompile(`^(?i:ALL|(CAP_)?[A-Z][A-Z_]*)$`)
	hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	driverRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)
	userRE     = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?$`)
)

// knownSignals are the names stop-signal takes (without SIG).
var knownSignals = map[string]bool{"HUP": true, "INT": true, "QUIT": true, "ILL": true, "TRAP": true, "ABRT": true,
	"IOT": true, "BUS": true, "FPE": true, "KILL": true, "USR1": true, "SEGV": true, "USR2": true, "PIPE": true,
	"ALRM": true, "TERM": true, "STKFLT": true, "CHLD": true, "CONT": true, "STOP": true, "TSTP": true,
	"TTIN": true, "TTOU": true, "URG": true, "XCPU": true, "XFSZ": true, "VTALRM": true, "PROF": true,
	"WINCH": true, "IO": true, "POLL": true, "PWR": true, "SYS": true}

// fields validates c's container fields; p is its path.
func (v *validator) fields(p []string, c *Container) {
	at := func(field string, more ...string) []string {
		return append(append(append([]string{}, p...), field), more...)
	}
	if h := c.Healthcheck; h != nil {
		switch {
		case h.Disable && len(h.Test) > 0 && h.Test[0] != "NONE":
			v.fail(at("healthcheck", "disable"), "give either disable or test, not both")
		case !h.Disable && len(h.Test) == 0:
			v.fail(at("healthcheck"), "test is missing: give test (a command) or disable: true")
		case len(h.Test) > 0 && h.Test[0] != "CMD" && h.Test[0] != "CMD-SHELL" && h.Test[0] != "NONE":
			v.fail(at("healthcheck", "test"), "%q is not CMD, CMD-SHELL or NONE: write [CMD, prog, args…], [CMD-SHELL, \"command\"] or a string", h.Test[0])
		case len(h.Test) == 1 && h.Test[0] != "NONE" || len(h.Test) > 1 && h.Test[1] == "":
			v.fail(at("healthcheck", "test"), "%s needs a command", h.Test[0])
		case len(h.Test) > 1 && h.Test[0] == "NONE":
			v.fail(at("healthcheck", "test"), "NONE takes no command")
		case len(h.Test) > 2 && h.Test[0] == "CMD-SHELL":
			v.fail(at("healthcheck", "test"), "CMD-SHELL takes one command string")
		case h.Retries < 0:
			v.fail(at("healthcheck", "retries"), "%d must not be negative", h.Retries)
		}
	}
	if c.StopSignal != "" {
		name := strings.TrimPrefix(strings.ToUpper(c.StopSignal), "SIG")
		n, numErr := strconv.Atoi(c.StopSignal)
		if !signalRE.MatchString(c.StopSignal) || numErr != nil && !knownSignals[name] || numErr == nil && (n < 1 || n > 64) {
			v.fail(at("stop-signal"), "%q is not a signal (write SIGTERM, SIGQUIT, SIGINT…)", c.StopSignal)
		}
	}
	if c.User != "" && !userRE.MatchString(c.User) {
		v.fail(at("user"), "%q is not a user: write NAME, UID, NAME:GROUP or UID:GID", c.User)
	}
	if c.WorkingDir != "" && !strings.HasPrefix(c.WorkingDir, "/") {
		v.fail(at("working-dir"), "%q is not an absolute path", c.WorkingDir)
	}
	if c.Hostname != "" && (len(c.Hostname) > 253 || !hostnameRE.MatchString(c.Hostname)) {
		v.fail(at("hostname"), "%q is not a host name: letters, digits, '-' and '.'", c.Hostname)
	}
	for i, t := range c.Tmpfs {
		path, _, _ := strings.Cut(t, ":")
		if !strings.HasPrefix(path, "/") {
			v.fail(at("tmpfs", index(i)), "%q: use /path or /path:options (size=64m,mode=1777)", t)
		}
	}
	for _, f := range []struct {
		name string
		caps []string
	}{{"cap-add", c.CapAdd}, {"cap-drop", c.CapDrop}} {
		for i, cp := range f.caps {
			if !capRE.MatchString(cp) {
				v.fail(at(f.name, index(i)), "%q is not a capability (write NET_ADMIN, SYS_PTRACE… or ALL)", cp)
			}
		}
	}
	if c.Memory != "" {
		n, err := units.RAMInBytes(c.Memory)
		switch {
		case err != nil:
			v.fail(at("memory"), "%q is not a size: write e.g. 512m or 2g", c.Memory)
		case n < MinMemory:
			v.fail(at("memory"), "%q is below the engine's minimum of 6m", c.Memory)
		}
	}
	if c.CPUs < 0 || math.IsNaN(c.CPUs) || math.IsInf(c.CPUs, 0) || c.CPUs > 0 && c.CPUs < 0.01 {
		v.fail(at("cpus"), "%v is not a CPU count: give a positive number such as 0.5 or 2", c.CPUs)
	}
	if c.PidsLimit < -1 {
		v.fail(at("pids-limit"), "%d is not a limit: give a positive number, or -1 for none", c.PidsLimit)
	}
	if l := c.Logging; l != nil {
		switch {
		case l.Driver == "" && len(l.Options) > 0:
			v.fail(at("logging"), "driver is missing: options need a driver")
		case l.Driver != "" && !driverRE.MatchString(l.Driver):
			v.fail(at("logging", "driver"), "%q is not a log driver name", l.Driver)
		}
		for _, k := range sortedKeys(l.Options) {
			if k == "" || strings.IndexFunc(k, badKeyRune) >= 0 {
				v.fail(at("logging", "options", k), "%q is not an option name", k)
			}
		}
	}
	for i, h := range c.ExtraHosts {
		name, ip, ok := strings.Cut(h, "=")
		if !ok {
			name, ip, ok = strings.Cut(h, ":")
		}
		switch {
		case !ok || !hostnameRE.MatchString(name):
			v.fail(at("extra-hosts", index(i)), "%q: use HOST:IP", h)
		case ip != "host-gateway" && net.ParseIP(ip) == nil:
			v.fail(at("extra-hosts", index(i)), "%q: %q is not an IP address (or host-gateway)", h, ip)
		}
	}
	for i, f := range c.EnvFile {
		if f == "" {
			v.fail(at("env-file", index(i)), "is empty: name a file of KEY=VALUE lines")
		}
	}
}

// dependencies checks every depends-on of f: each names a container of its
// own module ("name") or of another ("module.name"), not itself, and
// together they make no cycle. A module the file does not name may be
// depended on: it was applied by another file, and is converged already.
func (v *validator) dependencies(f *File) {
	type node = string
	edges := map[node][]node{}
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		if m == nil {
			continue
		}
		for _, cn := range m.ContainerNames() {
			c := m.Containers[cn]
			if c == nil {
				continue
			}
			self := EngineName(mn, cn)
			seen := map[string]bool{}
			for i, dep := range c.DependsOn {
				p := []string{"modules", mn, "containers", cn, "depends-on", index(i)}
				full, ok := DependencyName(mn, dep)
				switch {
				case !ok:
					v.fail(p, "%q is not a container name: write NAME (this module) or MODULE.NAME", dep)
					continue
				case full == self:
					v.fail(p, "%q is the container itself", dep)
					continue
				case seen[full]:
					v.fail(p, "%q listed twice", dep)
					continue
				}
				seen[full] = true
				dm, dc, _ := strings.Cut(full, ".")
				if other, named := f.Modules[dm]; named && other != nil {
					if _, ok := other.Containers[dc]; !ok {
						msg := fmt.Sprintf("unknown container %q (module %s has: %s)", dep, dm, strings.Join(other.ContainerNames(), ", "))
						if s := Suggest(dc, other.ContainerNames()); s != "" {
							msg += fmt.Sprintf("; did you mean %q?", s)
						}
						v.fail(p, "%s", msg)
						continue
					}
					edges[self] = append(edges[self], full)
				}
			}
		}
	}
	if cycle := findCycle(edges); cycle != nil {
		mn, cn, _ := strings.Cut(cycle[0], ".")
		v.fail([]string{"modules", mn, "containers", cn, "depends-on"}, "dependency cycle: %s", strings.Join(cycle, " → "))
	}
}

// DependencyName returns the engine name of dep as written in module's
// container: "name" is module.name.
func DependencyName(module, dep string) (string, bool) {
	if m, c, ok := strings.Cut(dep, "."); ok {
		return dep, ValidName(m) && ValidName(c)
	}
	return EngineName(module, dep), ValidName(dep)
}

// Dependencies returns the engine names the container depends on.
func (c *Container) Dependencies(module string) []string {
	var out []string
	for _, d := range c.DependsOn {
		if n, ok := DependencyName(module, d); ok {
			out = append(out, n)
		}
	}
	return out
}

// findCycle returns a cycle of edges (first node repeated at the end), or
// nil. Nodes are visited in order, so the same cycle is named every time.
func findCycle(edges map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range edges[n] {
			switch color[m] {
			case grey:
				i := slices.Index(stack, m)
				found = append(slices.Clone(stack[i:]), m)
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, n := range sortedKeys(edges) {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}
