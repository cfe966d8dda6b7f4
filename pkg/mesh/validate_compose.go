package mesh

import (
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/docker/go-units"

	"github.com/meshctl/meshctl/pkg/lazyre"
)

var (
	signalRE   = lazyre.New(`^(?i:(SIG)?[A-Z][A-Z0-9+-]*|[0-9]{1,2})$`)
	capRE      = lazyre.New(`^(?i:ALL|(CAP_)?[A-Z][A-Z_]*)$`)
	hostnameRE = lazyre.New(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)
	driverRE   = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.:/-]*$`)
	userRE     = lazyre.New(`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?$`)
)

// knownSignals are the names stop-signal takes, without SIG.
var knownSignals = map[string]bool{"HUP": true, "INT": true, "QUIT": true, "ILL": true, "TRAP": true, "ABRT": true,
	"IOT": true, "BUS": true, "FPE": true, "KILL": true, "USR1": true, "SEGV": true, "USR2": true, "PIPE": true,
	"ALRM": true, "TERM": true, "STKFLT": true, "CHLD": true, "CONT": true, "STOP": true, "TSTP": true,
	"TTIN": true, "TTOU": true, "URG": true, "XCPU": true, "XFSZ": true, "VTALRM": true, "PROF": true,
	"WINCH": true, "IO": true, "POLL": true, "PWR": true, "SYS": true}

// fields validates c's container fields. p is its path.
func (v *validator) fields(p []string, c *Container) {
	at := func(field string, more ...string) []string {
		return append(append(append([]string{}, p...), field), more...)
	}
	v.healthcheck(at, c.Healthcheck)
	v.process(at, c)
	v.limits(at, c)
	v.logging(at, c.Logging)
	v.extraHosts(at, c.ExtraHosts)
	v.fileMounts(at, c)
	v.runtime(at, c)
	for i, f := range c.EnvFile {
		if f == "" {
			v.fail(at("env-file", index(i)), "is empty: name a file of KEY=VALUE lines")
		}
	}
}

// pathFunc makes the path of one of a container's fields.
type pathFunc func(field string, more ...string) []string

func (v *validator) healthcheck(at pathFunc, h *Healthcheck) {
	if h == nil {
		return
	}
	switch {
	case h.Disable && len(h.Test) > 0 && h.Test[0] != "NONE":
		v.fail(at("healthcheck", "disable"), "give either disable or test, not both")
	case !h.Disable && len(h.Test) == 0 && !v.undecoded(at("healthcheck", "test")...) && !v.undecoded(at("healthcheck", "disable")...):
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

// process checks how the container's process runs. That covers its stop
// signal, user, working directory, host name, tmpfs mounts and capabilities.
func (v *validator) process(at pathFunc, c *Container) {
	if c.StopSignal != "" {
		name := strings.TrimPrefix(strings.ToUpper(c.StopSignal), "SIG")
		n, numErr := strconv.Atoi(c.StopSignal)
		if !signalRE().MatchString(c.StopSignal) || numErr != nil && !knownSignals[name] || numErr == nil && (n < 1 || n > 64) {
			v.fail(at("stop-signal"), "%q is not a signal (write SIGTERM, SIGQUIT, SIGINT…)", c.StopSignal)
		}
	}
	if c.User != "" && !userRE().MatchString(c.User) {
		v.fail(at("user"), "%q is not a user: write NAME, UID, NAME:GROUP or UID:GID", c.User)
	}
	if c.WorkingDir != "" && !strings.HasPrefix(c.WorkingDir, "/") {
		v.fail(at("working-dir"), "%q is not an absolute path", c.WorkingDir)
	}
	if c.Hostname != "" && (len(c.Hostname) > 253 || !hostnameRE().MatchString(c.Hostname)) {
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
			if !capRE().MatchString(cp) {
				v.fail(at(f.name, index(i)), "%q is not a capability (write NET_ADMIN, SYS_PTRACE… or ALL)", cp)
			}
		}
	}
}

// limits checks the container's memory, cpus and pids-limit.
func (v *validator) limits(at pathFunc, c *Container) {
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
}

func (v *validator) logging(at pathFunc, l *Logging) {
	if l == nil {
		return
	}
	switch {
	case l.Driver == "" && len(l.Options) > 0 && !v.undecoded(at("logging", "driver")...):
		v.fail(at("logging"), "driver is missing: options need a driver")
	case l.Driver != "" && !driverRE().MatchString(l.Driver):
		v.fail(at("logging", "driver"), "%q is not a log driver name", l.Driver)
	}
	for _, k := range sortedKeys(l.Options) {
		if k == "" || strings.IndexFunc(k, badKeyRune) >= 0 {
			v.fail(at("logging", "options", k), "%q is not an option name", k)
		}
	}
}

func (v *validator) extraHosts(at pathFunc, hosts []string) {
	for i, h := range hosts {
		name, ip, ok := strings.Cut(h, "=")
		if !ok {
			name, ip, ok = strings.Cut(h, ":")
		}
		switch {
		case !ok || !hostnameRE().MatchString(name):
			v.fail(at("extra-hosts", index(i)), "%q: use HOST:IP", h)
		case ip != "host-gateway" && net.ParseIP(ip) == nil:
			v.fail(at("extra-hosts", index(i)), "%q: %q is not an IP address (or host-gateway)", h, ip)
		}
	}
}

var (
	exposeRE = lazyre.New(`^([0-9]{1,5})(-([0-9]{1,5}))?(/(?i:tcp|udp|sctp))?$`)
	sysctlRE = lazyre.New(`^[a-z0-9_]+(\.[A-Za-z0-9_*/-]+)+$`)
)

// knownUlimits are the limits the engine sets, setrlimit's without RLIMIT_.
var knownUlimits = []string{"as", "core", "cpu", "data", "fsize", "locks", "memlock", "msgqueue", "nice",
	"nofile", "nproc", "rss", "rtprio", "rttime", "sigpending", "stack"}

// runtime checks what the container's process runs with. That covers its
// exposed ports, sysctls, ulimits and name servers.
func (v *validator) runtime(at pathFunc, c *Container) {
	for i, e := range c.Expose {
		m := exposeRE().FindStringSubmatch(e)
		lo, _ := strconv.Atoi(m1(m, 1))
		hi := lo
		if m1(m, 3) != "" {
			hi, _ = strconv.Atoi(m[3])
		}
		if m == nil || lo < 1 || hi > 65535 || hi < lo {
			v.fail(at("expose", index(i)), "%q is not a port: write PORT, PORT/udp or FIRST-LAST (1-65535)", e)
		}
	}
	for _, k := range sortedKeys(c.Sysctls) {
		switch val := c.Sysctls[k]; {
		case !sysctlRE().MatchString(k):
			v.fail(at("sysctls", k), "%q is not a kernel parameter name (write e.g. net.core.somaxconn)", k)
		case val == "":
			v.fail(at("sysctls", k), "has no value")
		default:
			if ch, bad := controlIn(val); bad {
				v.fail(at("sysctls", k), "the value holds a control character (%s)", ch)
			}
		}
	}
	for _, k := range sortedKeys(c.Ulimits) {
		u := c.Ulimits[k]
		switch {
		case !slices.Contains(knownUlimits, k):
			v.fail(at("ulimits", k), "%q is not a limit the engine sets (%s)", k, strings.Join(knownUlimits, ", "))
		case u.Soft < -1 || u.Hard < -1 || u.Hard != -1 && (u.Soft == -1 || u.Soft > u.Hard):
			v.fail(at("ulimits", k), "soft %d, hard %d: give 0 ≤ soft ≤ hard (-1 is unlimited)", u.Soft, u.Hard)
		}
	}
	for i, s := range c.DNS {
		if net.ParseIP(s) == nil {
			v.fail(at("dns", index(i)), "%q is not an IP address", s)
		}
	}
}

// m1 is submatch i of m, "" when m did not match.
func m1(m []string, i int) string {
	if m == nil {
		return ""
	}
	return m[i]
}
