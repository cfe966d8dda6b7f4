package engine

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"
)

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
				if r.Config != nil {
					out = hideEnv(out, r.Config.Env)
					if files, ok := hiddenFiles(r.Config.Labels); ok {
						out = hideFiles(out, files)
					} else {
						out = "(withheld: a secret or config file of the container, which it may quote, could not be read)"
					}
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

// summaryHealth reads the health that a container list entry's status gives.
// Examples are "Up 5 minutes (healthy)", "(unhealthy)" and "(health:
// starting)".
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
	if err != nil {
		return "", err
	}
	// A program may print its environment or its secrets, and meshctl
	// prints the tail.
	env, labels, ok := c.envOf(ctx, id)
	if !ok {
		return "", fmt.Errorf("logs of %s: not shown: the container's environment, which they may quote, could not be read", id)
	}
	files, ok := hiddenFiles(labels)
	if !ok {
		return "", fmt.Errorf("logs of %s: not shown: a secret or config file of the container, which they may quote, could not be read", id)
	}
	return hideFiles(hideEnv(out.String(), env), files), nil
}
