package lifecycle

import (
	"encoding/json"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// EngineSpec returns what the engine needs to create d. Its labels say
// that the state directory whose ID is scope manages it.
func (d Desired) EngineSpec(scope string) engine.Spec {
	labels := maps.Clone(d.Def.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[LabelManaged] = scope
	labels[LabelRole] = RoleService
	labels[LabelModule] = d.Module
	labels[LabelContainer] = d.Container
	labels[LabelSpec] = d.Spec.Encode()
	if d.Build != "" {
		labels[LabelBuild] = d.Build
	}
	restart := d.Def.Restart
	if restart == "" {
		restart = mesh.DefaultRestart
	}
	spec := engine.Spec{
		Image:       d.Image,
		Entrypoint:  slices.Clone(d.Def.Entrypoint), // keeps [] (clear the image's) apart from nil
		Cmd:         slices.Clone(d.Def.Command),
		Env:         envList(d.Def.Env),
		Binds:       slices.Clone(d.Def.Volumes),
		NetworkMode: d.Def.Network,
		Networks:    d.networkAliases(),
		Ports:       slices.Clone(d.Def.Ports),
		Restart:     restart,
		Labels:      labels,
	}
	containerFields(&spec, &d.Def)
	return spec
}

func envList(env map[string]string) []string {
	if len(env) == 0 {
		return nil
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// containerFields sets on spec what c's container fields ask for, in the
// canonical form the recorded spec holds.
func containerFields(spec *engine.Spec, c *mesh.Container) {
	f := c.Spec("").SpecFields
	spec.StopSignal = f.StopSignal
	if c.StopGracePeriod != 0 {
		// The engine's own stops, such as docker stop or a daemon
		// shutdown, honour it too. meshctl's pass it explicitly
		// (StopTimeoutOf).
		secs := int((c.StopGrace() + time.Second - 1) / time.Second)
		spec.StopTimeout = &secs
	}
	if h := f.Health; h != nil {
		spec.Healthcheck = &engine.Healthcheck{Test: slices.Clone(h.Test), Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, Retries: h.Retries}
	}
	spec.User, spec.WorkingDir, spec.Hostname = f.User, f.WorkingDir, f.Hostname
	spec.Init, spec.ReadOnly = f.Init, f.ReadOnly
	if len(f.Tmpfs) > 0 {
		spec.Tmpfs = map[string]string{}
		for _, t := range f.Tmpfs {
			path, opts, _ := strings.Cut(t, ":")
			spec.Tmpfs[path] = opts
		}
	}
	spec.CapAdd, spec.CapDrop = f.CapAdd, f.CapDrop
	spec.Memory, spec.NanoCPUs, spec.PidsLimit = f.Memory, f.NanoCPUs, f.PidsLimit
	spec.LogDriver, spec.LogOptions = f.LogDriver, f.LogOptions
	spec.ExtraHosts = f.ExtraHosts
	// Secrets and configs are the host files themselves, bound read-only.
	// Their content never passes through meshctl's requests. One removed
	// between the plan and the start fails the start (engine.Spec.Files).
	hidden := map[string]string{}
	for _, m := range c.Secrets {
		hidden[m.TargetPath(mesh.KindSecret)] = m.File
	}
	for _, m := range c.Configs {
		hidden[m.TargetPath(mesh.KindConfig)] = m.File
	}
	// The engine hides these files' content in what it says of the
	// container (its log tail, its probe's output).
	if len(hidden) > 0 {
		spec.Files = maps.Clone(hidden)
		b, _ := json.Marshal(hidden)
		spec.Labels[engine.LabelHidden] = string(b)
	}
	spec.Expose, spec.Sysctls, spec.DNS = f.Expose, f.Sysctls, f.DNS
	for _, name := range slices.Sorted(maps.Keys(f.Ulimits)) {
		u := f.Ulimits[name]
		spec.Ulimits = append(spec.Ulimits, engine.Ulimit{Name: name, Soft: u.Soft, Hard: u.Hard})
	}
	spec.Privileged, spec.StdinOpen, spec.Tty = f.Privileged, f.StdinOpen, f.TTY
}

// StopTimeoutOf is how long meshctl's stops of c wait before they kill it.
// It is the stop-grace-period c was created with, read from its recorded
// spec, else StopTimeout. The engine sends the container's own stop-signal.
func StopTimeoutOf(c engine.Container) time.Duration {
	s, err := mesh.DecodeSpec(c.Labels[LabelSpec])
	if err != nil || s.StopGracePeriod <= 0 {
		return StopTimeout
	}
	return s.StopGracePeriod
}

// PeekScope returns the state directory's ID, the value of LabelManaged,
// without making one. It serves what changes nothing, such as status and
// apply --dry-run. A state directory without an ID manages no container
// yet, so it gets a scope that matches none.
func PeekScope(d *state.Dir) (string, error) {
	id, ok, err := d.PeekID()
	if err != nil || ok {
		return id, err
	}
	return "none-yet", nil
}

// SpecDiff compares the spec recorded on c with want. A container whose
// recorded spec cannot be read is recreated. meshctl cannot know what it
// runs.
func SpecDiff(c engine.Container, want mesh.Spec) []string {
	return specDiff(c, want, want.Encode())
}

// specDiff is SpecDiff, given want encoded (mesh.Spec.Encode).
func specDiff(c engine.Container, want mesh.Spec, encoded string) []string {
	label := c.Labels[LabelSpec]
	if label == encoded {
		// The label this meshctl would record. Encoding is cheaper than
		// decoding the label, and equal encodings are equal specs.
		return nil
	}
	have, err := mesh.DecodeSpec(label)
	if err != nil {
		return []string{"recorded spec unreadable"}
	}
	return mesh.Diff(have, want)
}

// ReasonNewerPull is the reason for recreating a `pull: always` container
// whose image tag now names another image than the one it runs.
const ReasonNewerPull = "image (newer pull)"

// Diff is SpecDiff of c against d. ReasonNewerPull comes first if d is a
// `pull: always` container whose pull gave another image id than c runs.
// It is the one rule for apply's plan and a window's close.
func Diff(c engine.Container, d *Desired) []string {
	return DiffEncoded(c, d, d.Spec.Encode())
}

// DiffEncoded is Diff, given d's spec encoded (mesh.Spec.Encode). An apply
// encodes its specs while the engine makes its list, so that the plan
// after the answer only compares.
func DiffEncoded(c engine.Container, d *Desired, encoded string) []string {
	diff := specDiff(c, d.Spec, encoded)
	if d.PulledID != "" && c.ImageID != "" && c.ImageID != d.PulledID && !slices.ContainsFunc(diff, mesh.IsImageReason) {
		diff = append([]string{ReasonNewerPull}, diff...)
	}
	return diff
}
