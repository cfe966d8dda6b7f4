package mesh

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

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
	// Secrets and Configs are by name. Each content is a keyed hash.
	Secrets    map[string]SpecFile `json:"secrets,omitempty"`
	Configs    map[string]SpecFile `json:"configs,omitempty"`
	Expose     []string            `json:"expose,omitempty"` // "80/tcp"
	Sysctls    map[string]string   `json:"sysctls,omitempty"`
	Ulimits    map[string]Ulimit   `json:"ulimits,omitempty"`
	Privileged bool                `json:"privileged,omitempty"`
	StdinOpen  bool                `json:"stdin_open,omitempty"`
	TTY        bool                `json:"tty,omitempty"`
	DNS        []string            `json:"dns,omitempty"` // in order: the first is asked first
}

// SpecHealth is a healthcheck in canonical form. Test ["NONE"] disables the
// image's. Durations and retries have their defaults filled in.
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
		Secrets:         specFiles(KindSecret, c.Secrets),
		Configs:         specFiles(KindConfig, c.Configs),
		Expose:          slices.Clone(c.Expose),
		Sysctls:         maps.Clone(c.Sysctls),
		Ulimits:         maps.Clone(c.Ulimits),
		Privileged:      c.Privileged,
		StdinOpen:       c.StdinOpen,
		TTY:             c.TTY,
		DNS:             slices.Clone(c.DNS),
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
	if len(s.Secrets) == 0 {
		s.Secrets = nil
	}
	if len(s.Configs) == 0 {
		s.Configs = nil
	}
	expose := make([]string, 0, len(s.Expose))
	for _, e := range s.Expose {
		expose = append(expose, normExpose(e))
	}
	s.Expose = slices.Compact(sortedOrNil(expose))
	if len(s.Sysctls) == 0 {
		s.Sysctls = nil
	}
	if len(s.Ulimits) == 0 {
		s.Ulimits = nil
	}
	if len(s.DNS) == 0 {
		s.DNS = nil
	}
	return s
}

// normExpose writes an exposed port as the engine does, such as "80/tcp".
func normExpose(e string) string {
	if !strings.Contains(e, "/") {
		return e + "/tcp"
	}
	return strings.ToLower(e)
}

// normSignal writes a signal as "SIGTERM". A number stays a number.
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

// normHost writes an extra host as the engine does, `host:ip`.
func normHost(h string) string {
	if name, ip, ok := strings.Cut(h, "="); ok {
		return name + ":" + ip
	}
	return h
}
