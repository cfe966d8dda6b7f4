package mesh

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// SpecVersion is the version of the canonical spec this meshctl records. A
// spec recorded by an older meshctl lacks the fields added since. They read
// as their defaults. So an upgrade never recreates a container whose
// effective spec did not change.
//
// Version 2 records "entrypoint": [] apart from no entrypoint. The empty one
// clears the image's entrypoint. Version 1 recorded both alike.
//
// Version 3 adds the container fields (SpecFields), each absent at its
// default. Fields added since are absent at their default too. They are
// secrets, configs, expose, sysctls, ulimits, privileged, stdin-open, tty and
// dns. So they need no new version. A spec recorded without them reads as
// them unset, and an upgrade recreates nothing.
const SpecVersion = 3

// clearedEntrypointVersion is the first spec version that tells an empty
// entrypoint from none.
const clearedEntrypointVersion = 2

// Spec is the canonical, comparable form of a container's desired state.
// meshctl records it on the container it creates, in the label
// io.meshctl.spec. So the next apply compares what it wants with what it
// asked for. The engine's report would not do, since it adds image defaults.
//
// Env values are recorded as hashes. So the label repeats no secret, and a
// diff names the variable, never its value.
type Spec struct {
	V     int    `json:"v"`
	Image string `json:"image"`
	// Entrypoint is nil for the image's. An empty one, recorded as [], clears
	// it.
	Entrypoint []string          `json:"entrypoint,omitzero"`
	Command    []string          `json:"command,omitempty"`
	Env        map[string]string `json:"env,omitempty"` // name → "sha256:…" of the value
	Volumes    []string          `json:"volumes,omitempty"`
	Network    string            `json:"network,omitempty"`
	Ports      []string          `json:"ports,omitempty"`
	Restart    string            `json:"restart,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	// SpecFields are the container fields added in version 3. Each zero value
	// is the default, so an older spec reads as the defaults.
	SpecFields
	// Networks are the networks the container joins, by engine name. The file
	// sets them, since it knows the modules (File.SpecNetworks). None reads
	// as a spec recorded before networks existed.
	Networks map[string]SpecNetwork `json:"networks,omitempty"`
}

// Spec returns the canonical spec of c running image. For a container that
// names an artifact, image is the resolved image.
func (c *Container) Spec(image string) Spec {
	s := Spec{
		V:          SpecVersion,
		Image:      image,
		Entrypoint: slices.Clone(c.Entrypoint),
		Command:    slices.Clone(c.Command),
		Volumes:    slices.Clone(c.Volumes),
		Network:    c.Network,
		Ports:      slices.Clone(c.Ports),
		Restart:    c.Restart,
		Labels:     maps.Clone(c.Labels),
		SpecFields: c.specFields(),
	}
	if len(c.Env) > 0 {
		s.Env = make(map[string]string, len(c.Env))
		for k, v := range c.Env {
			s.Env[k] = HashValue(v)
		}
	}
	return s.Normalize()
}

// HashValue is how an env value is recorded in a spec.
func HashValue(v string) string {
	sum := sha256.Sum256([]byte(v))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Normalize fills defaults and puts order-free lists in order. So two specs
// that mean the same container are equal.
func (s Spec) Normalize() Spec {
	if s.Restart == "" {
		s.Restart = DefaultRestart
	}
	s.Volumes = sortedOrNil(s.Volumes)
	s.Ports = sortedOrNil(s.Ports)
	if s.Entrypoint == nil || len(s.Entrypoint) == 0 && s.V < clearedEntrypointVersion {
		s.Entrypoint = nil
	} else if len(s.Entrypoint) == 0 {
		s.Entrypoint = []string{}
	}
	if len(s.Command) == 0 {
		s.Command = nil
	}
	if len(s.Env) == 0 {
		s.Env = nil
	}
	if len(s.Labels) == 0 {
		s.Labels = nil
	}
	s.Networks = normNetworks(s.Networks)
	s.SpecFields = s.SpecFields.normalize()
	return s
}

func sortedOrNil(l []string) []string {
	if len(l) == 0 {
		return nil
	}
	l = slices.Clone(l)
	sort.Strings(l)
	return l
}

// Encode returns the spec as recorded in the container label.
func (s Spec) Encode() string {
	b, err := json.Marshal(s.Normalize())
	if err != nil {
		panic(err) // a Spec always encodes
	}
	return string(b)
}

// DecodeSpec reads a recorded spec. It is lenient on purpose. A spec recorded
// by a newer meshctl may carry fields this one does not know.
func DecodeSpec(label string) (Spec, error) {
	var s Spec
	if err := json.Unmarshal([]byte(label), &s); err != nil {
		return Spec{}, fmt.Errorf("recorded spec: %w", err)
	}
	return s.Normalize(), nil
}

// Diff names each field in which have differs from want. The names are image,
// entrypoint, command, env.KEY, volumes, network, networks.NAME, ports,
// restart and labels.KEY. They also cover the container fields, secrets.NAME
// and configs.NAME. Diff never names an env value or a file's content. Empty
// means equal.
//
// The image alone comes with its old and new value (ImageReason). A
// reference is no secret, and it says at a glance what a deploy changes.
func Diff(have, want Spec) []string {
	have, want = have.Normalize(), want.Normalize()
	var d []string
	if have.Image != want.Image {
		d = append(d, ImageReason(have.Image, want.Image))
	}
	if !sameEntrypoint(have, want) {
		d = append(d, "entrypoint")
	}
	if !slices.Equal(have.Command, want.Command) {
		d = append(d, "command")
	}
	d = append(d, diffMap("env.", have.Env, want.Env)...)
	if !slices.Equal(have.Volumes, want.Volumes) {
		d = append(d, "volumes")
	}
	if have.Network != want.Network {
		d = append(d, "network")
	}
	d = append(d, diffNetworks(have.Networks, want.Networks)...)
	if !slices.Equal(have.Ports, want.Ports) {
		d = append(d, "ports")
	}
	if have.Restart != want.Restart {
		d = append(d, "restart")
	}
	d = append(d, diffMap("labels.", have.Labels, want.Labels)...)
	d = append(d, diffFields(have.SpecFields, want.SpecFields)...)
	return d
}

// ImageReason is Diff's reason for an image that changed from old to new,
// as in "image: web:1 -> web:2".
func ImageReason(old, new string) string {
	return "image: " + old + " -> " + new
}

// IsImageReason reports whether reason is one of ImageReason's.
func IsImageReason(reason string) bool { return strings.HasPrefix(reason, "image: ") }

// sameEntrypoint compares entrypoints. It keeps an empty one, which clears,
// apart from none, which is the image's. A spec older than
// clearedEntrypointVersion recorded an empty entrypoint as none. So its none
// matches either. The upgrade rule prefers leaving such a container alone to
// recreating it for nothing.
func sameEntrypoint(have, want Spec) bool {
	if have.Entrypoint == nil && have.V < clearedEntrypointVersion && len(want.Entrypoint) == 0 {
		return true
	}
	return slices.Equal(have.Entrypoint, want.Entrypoint) && (have.Entrypoint == nil) == (want.Entrypoint == nil)
}

func diffMap(prefix string, have, want map[string]string) []string {
	var keys []string
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			keys = append(keys, prefix+k)
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			keys = append(keys, prefix+k)
		}
	}
	sort.Strings(keys)
	return keys
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
	d = append(d, diffFiles("secrets.", have.Secrets, want.Secrets)...)
	d = append(d, diffFiles("configs.", have.Configs, want.Configs)...)
	add("expose", !slices.Equal(have.Expose, want.Expose))
	add("sysctls", !maps.Equal(have.Sysctls, want.Sysctls))
	add("ulimits", !maps.Equal(have.Ulimits, want.Ulimits))
	add("privileged", have.Privileged != want.Privileged)
	add("stdin-open", have.StdinOpen != want.StdinOpen)
	add("tty", have.TTY != want.TTY)
	add("dns", !slices.Equal(have.DNS, want.DNS))
	return d
}

func sameHealth(a, b *SpecHealth) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Test, b.Test) && a.Interval == b.Interval && a.Timeout == b.Timeout &&
		a.Retries == b.Retries && a.StartPeriod == b.StartPeriod
}
