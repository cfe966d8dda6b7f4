package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// Health a new or restarted container reached (the report's "health").
const (
	// HealthHealthy means its healthcheck passed.
	HealthHealthy = "healthy"
	// HealthRunning means it has no healthcheck and still ran, not
	// restarting, after the settle time.
	HealthRunning = "running"
	// HealthUnhealthy means its healthcheck failed, or did not pass in time.
	HealthUnhealthy = "unhealthy"
	// HealthExited means it stopped.
	HealthExited = "exited"
	// HealthRestarting means the engine restarted it, or is restarting it.
	HealthRestarting = "restarting"
	// HealthCompleted means a one-shot container did its job. It has
	// restart "no" or "on-failure", no healthcheck, and exited 0.
	HealthCompleted = "completed"
)

// DefaultSettle is how long a container without a healthcheck must keep
// running, not restarting, to count as started (apply --settle).
const DefaultSettle = engine.Settle

// healthPoll is how often a health wait asks the engine.
const healthPoll = 200 * time.Millisecond

// logLines is how many of its last log lines a failed container's report
// shows.
const logLines = 10

// HealthError is a container that did not become healthy. Reason says
// how, such as "exited 1 after 2s", "restarting" or "unhealthy: <last
// probe output>". Log holds its last log lines.
type HealthError struct {
	Name   string
	Health string
	Reason string
	Log    []string
}

func (e *HealthError) Error() string { return e.Reason }

// healthBudget is how long a container with healthcheck h may take to
// become healthy. It is start period + retries × (interval + timeout),
// with the engine's defaults.
func healthBudget(h *engine.Healthcheck) time.Duration {
	interval, timeout, retries := h.Interval, h.Timeout, h.Retries
	if interval <= 0 {
		interval = mesh.DefaultHealthInterval
	}
	if timeout <= 0 {
		timeout = mesh.DefaultHealthTimeout
	}
	if retries <= 0 {
		retries = mesh.DefaultHealthRetries
	}
	return h.StartPeriod + time.Duration(retries)*(interval+timeout)
}

// WaitHealthy waits until the container id, called name, just started, is
// healthy. With a healthcheck, it waits until the check passes, within its
// budget. Without one, it waits until the container has run for x.Settle
// without exiting or being restarted. A container the engine keeps
// restarting fails even while it reads running. Its StartedAt or
// RestartCount moves. A one-shot container that exits 0 has completed,
// which counts as a success. It has restart "no" or "on-failure" and no
// healthcheck. WaitHealthy returns the health reached. If that is not
// healthy or running, it also returns a *HealthError with the last log
// lines.
func (x Executor) WaitHealthy(ctx context.Context, id, name string) (string, error) {
	first, err := x.Engine.Inspect(ctx, id)
	if err != nil {
		return "", fmt.Errorf("inspect %s: %w", name, err)
	}
	probe := first.Healthcheck != nil && len(first.Healthcheck.Test) > 0 && first.Healthcheck.Test[0] != "NONE"
	start := time.Now()
	budget := x.Settle
	if probe {
		budget = max(healthBudget(first.Healthcheck), x.Settle)
	}
	c := first
	for {
		switch {
		case c.Restarting || c.RestartCount != first.RestartCount || !c.StartedAt.Equal(first.StartedAt):
			return x.unhealthy(ctx, id, name, HealthRestarting, restartedReason(c))
		case !c.Running && !probe && c.ExitCode == 0 && (c.RestartPolicy == "no" || c.RestartPolicy == "on-failure" || c.RestartPolicy == ""):
			// Nothing will restart it and it succeeded. A job, done.
			return HealthCompleted, nil
		case !c.Running:
			ran := c.FinishedAt.Sub(c.StartedAt).Round(100 * time.Millisecond)
			if c.FinishedAt.IsZero() || c.StartedAt.IsZero() || ran < 0 {
				ran = time.Since(start).Round(100 * time.Millisecond)
			}
			if c.RestartPolicy == "always" || c.RestartPolicy == "unless-stopped" || c.RestartPolicy == "on-failure" && c.ExitCode != 0 {
				// Seen between its exit and the engine's restart. A crash loop.
				return x.unhealthy(ctx, id, name, HealthRestarting, fmt.Sprintf("restarting: exited %d after %s, and the engine restarts it", c.ExitCode, ran))
			}
			return x.unhealthy(ctx, id, name, HealthExited, fmt.Sprintf("exited %d after %s", c.ExitCode, ran))
		case probe && c.Health == HealthHealthy:
			return HealthHealthy, nil
		case probe && c.Health == HealthUnhealthy:
			return x.unhealthy(ctx, id, name, HealthUnhealthy, "unhealthy: "+oneLine(c.HealthOutput))
		case !probe && time.Since(start) >= x.Settle:
			return HealthRunning, nil
		case probe && time.Since(start) >= budget:
			why := fmt.Sprintf("unhealthy: no probe passed within %s", budget.Round(time.Millisecond))
			if c.HealthOutput != "" {
				why += ": " + oneLine(c.HealthOutput)
			}
			return x.unhealthy(ctx, id, name, HealthUnhealthy, why)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(healthPoll):
		}
		if c, err = x.Engine.Inspect(ctx, id); err != nil {
			return "", fmt.Errorf("inspect %s: %w", name, err)
		}
	}
}

// unhealthy makes the HealthError for a container that failed its wait,
// with its last log lines.
func (x Executor) unhealthy(ctx context.Context, id, name, health, reason string) (string, error) {
	e := &HealthError{Name: name, Health: health, Reason: reason}
	if out, err := x.Engine.Tail(CleanupContext(ctx), id, logLines); err == nil {
		for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
			if l = strings.TrimRight(l, "\r"); l != "" {
				e.Log = append(e.Log, l)
			}
		}
	}
	return health, e
}

// oneLine keeps a probe's output to one short line for a reason.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "the probe failed without output"
	}
	return s
}

// restartedReason says how a container the engine restarted failed. Its exit
// code is known only while it is between its exit and the restart
// (Restarting). Once it runs again the engine has reset the code to 0. That
// must not be reported as the exit of a process that failed.
func restartedReason(c engine.Container) string {
	if c.Running && !c.Restarting {
		return fmt.Sprintf("restarting: it exited and the engine restarted it (restart count %d)", c.RestartCount)
	}
	return fmt.Sprintf("restarting: exited %d and was restarted by the engine (restart count %d)", c.ExitCode, c.RestartCount)
}
