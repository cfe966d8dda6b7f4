package engine

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

// containerFields sets, on the engine's create request, what Spec's
// container fields ask for.
func containerFields(cfg *container.Config, host *container.HostConfig, spec Spec) {
	cfg.StopSignal = spec.StopSignal
	cfg.User = spec.User
	cfg.WorkingDir = spec.WorkingDir
	cfg.Hostname = spec.Hostname
	if h := spec.Healthcheck; h != nil {
		cfg.Healthcheck = &container.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, Retries: h.Retries}
	}
	if spec.Init {
		yes := true
		host.Init = &yes
	}
	host.ReadonlyRootfs = spec.ReadOnly
	host.Tmpfs = spec.Tmpfs
	host.CapAdd = spec.CapAdd
	host.CapDrop = spec.CapDrop
	host.Resources.Memory = spec.Memory
	host.Resources.NanoCPUs = spec.NanoCPUs
	if spec.PidsLimit != 0 {
		n := spec.PidsLimit
		host.Resources.PidsLimit = &n
	}
	if spec.LogDriver != "" {
		host.LogConfig = container.LogConfig{Type: spec.LogDriver, Config: spec.LogOptions}
	}
	host.ExtraHosts = spec.ExtraHosts
}

// inspectHealth copies what the health wait needs from an inspect answer.
func inspectHealth(ct *Container, r container.InspectResponse) {
	if r.State != nil {
		ct.Restarting = r.State.Restarting
		if h := r.State.Health; h != nil && h.Status != container.NoHealthcheck {
			ct.Health = string(h.Status)
			if n := len(h.Log); n > 0 && h.Log[n-1] != nil {
				out := strings.TrimSpace(h.Log[n-1].Output)
				if out == "" {
					out = "exit code " + strconv.Itoa(h.Log[n-1].ExitCode)
				}
				ct.HealthOutput = out
			}
		}
	}
	if r.ContainerJSONBase != nil {
		ct.RestartCount = r.RestartCount
	}
	if r.Config != nil && r.Config.Healthcheck != nil && len(r.Config.Healthcheck.Test) > 0 {
		h := r.Config.Healthcheck
		ct.Healthcheck = &Healthcheck{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout,
			StartPeriod: h.StartPeriod, Retries: h.Retries}
	}
}

func (c *dockerClient) Tail(ctx context.Context, id string, lines int) (string, error) {
	var out bytes.Buffer
	err := c.do(ctx, "logs of "+id, func(ctx context.Context) error {
		rc, err := c.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true,
			Tail: strconv.Itoa(lines)})
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = stdcopy.StdCopy(&out, &out, rc)
		return err
	})
	return out.String(), err
}

// summaryHealth reads the health a container list entry's status gives:
// "Up 5 minutes (healthy)", "(unhealthy)", "(health: starting)".
func summaryHealth(status string) string {
	switch {
	case strings.HasSuffix(status, "(healthy)"):
		return "healthy"
	case strings.HasSuffix(status, "(unhealthy)"):
		return "unhealthy"
	case strings.HasSuffix(status, "(health: starting)"):
		return "starting"
	}
	return ""
}
