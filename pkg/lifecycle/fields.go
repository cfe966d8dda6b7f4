package lifecycle

import (
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// containerFields sets on spec what c's container fields ask for, in the
// canonical form the recorded spec holds.
func containerFields(spec *engine.Spec, c *mesh.Container) {
	f := c.Spec("").SpecFields
	spec.StopSignal = f.StopSignal
	if c.StopGracePeriod != 0 {
		// The engine's own stops (docker stop, a daemon shutdown) honour it
		// too; meshctl's pass it explicitly (StopTimeoutOf).
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
}

// StopTimeoutOf is how long meshctl's stops of c wait before they kill it:
// the stop-grace-period c was created with (read from its recorded spec),
// else StopTimeout. The signal is the container's own (stop-signal), which
// the engine sends.
func StopTimeoutOf(c engine.Container) time.Duration {
	s, err := mesh.DecodeSpec(c.Labels[LabelSpec])
	if err != nil || s.StopGracePeriod <= 0 {
		return StopTimeout
	}
	return s.StopGracePeriod
}
