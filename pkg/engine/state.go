package engine

import (
	"strconv"
	"strings"
	"time"
)

// RunState is what a container is doing, as every reader of the engine sees it.
type RunState string

// The states a container can be in.
const (
	// Running is a container that runs and was not just restarted.
	Running RunState = "running"
	// Restarting is one the engine restarts, or restarted a moment ago.
	Restarting RunState = "restarting"
	// Stopped is one that does not run.
	Stopped RunState = "stopped"
)

// Settle is how long a restarted container must run to read running again.
// A crash loop then reads restarting at every sample, not by turns.
// It is also the default of apply --settle (lifecycle.DefaultSettle).
const Settle = 3 * time.Second

// StateOf is the one rule for the state of container c at time now.
// Status, metrics, the plan and the window all ask it.
// A paused container runs; so does one the engine has not restarted.
// One it restarted reads restarting until it has run for Settle.
func StateOf(c Container, now time.Time) RunState {
	switch {
	case c.State == "restarting" || c.Restarting:
		return Restarting
	case !c.Running:
		return Stopped
	case c.RestartCount > 0 && !c.StartedAt.IsZero() && now.Sub(c.StartedAt) < Settle:
		return Restarting
	default:
		return Running
	}
}

// restartedLately reports whether a list entry may be a young restart.
// It has run less than Settle, and it started Settle or more after its
// creation. Only such an entry needs an inspect to know its restart count.
// A container just created and started needs none, so the next apply costs
// two requests still, even on a loaded host.
func restartedLately(status string, created, now time.Time) bool {
	up, ok := upFor(status)
	// The list gives both times in whole seconds, rounded down. The gap
	// it shows can thus be up to 2s more than the real one.
	return ok && up < Settle && now.Sub(created)-up > Settle+2*time.Second
}

// upFor reads how long a list entry's status says it has run, in seconds.
// The engine writes "Up 2 seconds" or "Up Less than a second" for a young
// one. It reports false for any other status.
func upFor(status string) (time.Duration, bool) {
	up, ok := strings.CutPrefix(status, "Up ")
	if !ok {
		return 0, false
	}
	if i := strings.Index(up, " ("); i >= 0 {
		up = up[:i]
	}
	if up == "Less than a second" {
		return 0, true
	}
	n, unit, ok := strings.Cut(up, " ")
	if !ok || unit != "second" && unit != "seconds" {
		return 0, false
	}
	s, err := strconv.Atoi(n)
	return time.Duration(s) * time.Second, err == nil
}
