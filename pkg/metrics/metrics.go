// Package metrics writes what meshctl knows of its host for the alerting
// operators already run. It writes Prometheus's text format to a file
// (--metrics-file), which node_exporter's textfile collector reads.
//
// The file is a rendering of the state directory, not a log. status writes it
// whole, and so does each command that changes what it reports. Those are
// apply, window run and ack, and the build commands. Each write is atomic, by
// a temp file beside it, fsync and rename. So the collector never reads half
// of it.
//
// Names follow Prometheus's conventions. A unit has a suffix (_seconds), and
// gauges have no _total. Only labels of bounded cardinality are used, such as
// module, step, state and action. A build id labels only the _info series,
// which has one per module.
package metrics

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
)

// HoldStates are the states a hold is counted in. Each is always written, 0
// when none. So an alert on one never sees the series vanish.
var HoldStates = []string{coord.Open, coord.Overdue, coord.Orphaned, coord.Unknown, coord.Stale}

// Snapshot is what the metrics file reports.
type Snapshot struct {
	// Windows is the history of closed windows, oldest first. It covers the
	// steps the applied state has.
	Windows []coord.Entry
	// Holds counts the open windows' holds by state.
	Holds map[string]int
	// Held counts the containers honoured holds hold, by mode: stopped or
	// changed.
	Held map[string]int
	// Apply is the last apply, nil before the first.
	Apply *Apply
	// Builds are the ledger's modules, nil when the ledger was not read.
	Builds []Build
}

// Apply is the last apply's outcome.
type Apply struct {
	FinishedAt time.Time
	OK         bool
	// Actions counts the report's containers by action.
	Actions map[string]int
}

// Build is one module of the ledger.
type Build struct {
	Module string
	// Current is the current build's id, "" when the module has none.
	// RequestedAt is when it was requested.
	Current     string
	RequestedAt time.Time
	Pending     int
}

// Render returns the snapshot in Prometheus's text exposition format.
func Render(s Snapshot) []byte {
	var b bytes.Buffer
	renderWindows(&b, s.Windows)
	renderHolds(&b, s.Holds)
	renderHeld(&b, s.Held)
	renderApply(&b, s.Apply)
	renderBuilds(&b, s.Builds)
	return b.Bytes()
}

// stepKey names a module's step.
type stepKey struct{ module, step string }

// stepWindows is what the history says of one step.
type stepWindows struct {
	last        coord.Entry
	lastSuccess time.Time
}

func renderWindows(b *bytes.Buffer, history []coord.Entry) {
	steps := map[stepKey]*stepWindows{}
	for _, e := range history {
		k := stepKey{e.Module, e.Step}
		sw := steps[k]
		if sw == nil {
			sw = &stepWindows{}
			steps[k] = sw
		}
		if e.ClosedAt.After(sw.last.ClosedAt) || sw.last.ID == "" {
			sw.last = e
		}
		if !e.Failed() && e.ClosedAt.After(sw.lastSuccess) {
			sw.lastSuccess = e.ClosedAt
		}
	}
	keys := make([]stepKey, 0, len(steps))
	for k := range steps {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b stepKey) int {
		return strings.Compare(a.module+"\x00"+a.step, b.module+"\x00"+b.step)
	})
	gauge := func(name, help string, value func(*stepWindows) (float64, bool)) {
		header(b, name, help)
		for _, k := range keys {
			if v, ok := value(steps[k]); ok {
				sample(b, name, v, "module", k.module, "step", k.step)
			}
		}
	}
	gauge("meshctl_window_last_success", "1 if the step's last window ended ok, else 0 (failed, timeout, interrupted, stale).",
		func(sw *stepWindows) (float64, bool) { return boolValue(!sw.last.Failed()), true })
	gauge("meshctl_window_last_start_timestamp_seconds", "When the step's last window opened, in seconds since the epoch.",
		func(sw *stepWindows) (float64, bool) { return seconds(sw.last.OpenedAt), true })
	gauge("meshctl_window_last_duration_seconds", "How long the step's last window was open, in seconds.",
		func(sw *stepWindows) (float64, bool) { return sw.last.ClosedAt.Sub(sw.last.OpenedAt).Seconds(), true })
	gauge("meshctl_window_last_success_timestamp_seconds", "When a window of the step last ended ok, in seconds since the epoch (absent when none in the history).",
		func(sw *stepWindows) (float64, bool) { return seconds(sw.lastSuccess), !sw.lastSuccess.IsZero() })
}

func renderHolds(b *bytes.Buffer, counts map[string]int) {
	header(b, "meshctl_holds", "Open windows' holds by state: open, overdue, orphaned, unknown (the engine could not say; honoured) and stale (its window died; released by the next apply or window).")
	for _, st := range HoldStates {
		sample(b, "meshctl_holds", float64(counts[st]), "state", st)
	}
}

// HeldModes are the modes a held container is counted in, each always
// written.
var HeldModes = []string{"stopped", "changed"}

func renderHeld(b *bytes.Buffer, counts map[string]int) {
	header(b, "meshctl_held_containers", "Containers the open windows hold, by mode: stopped, or changed (a changed copy runs under the name, the normal one waits aside).")
	for _, m := range HeldModes {
		sample(b, "meshctl_held_containers", float64(counts[m]), "mode", m)
	}
}

func renderApply(b *bytes.Buffer, a *Apply) {
	if a == nil {
		return
	}
	header(b, "meshctl_apply_last_timestamp_seconds", "When the last apply finished, in seconds since the epoch.")
	sample(b, "meshctl_apply_last_timestamp_seconds", seconds(a.FinishedAt))
	header(b, "meshctl_apply_last_success", "1 if the last apply succeeded, else 0.")
	sample(b, "meshctl_apply_last_success", boolValue(a.OK))
	header(b, "meshctl_apply_last_containers", "The last apply's containers by action (create, recreate, unchanged, held, deferred, failed, …).")
	actions := make([]string, 0, len(a.Actions))
	for act := range a.Actions {
		actions = append(actions, act)
	}
	slices.Sort(actions)
	for _, act := range actions {
		sample(b, "meshctl_apply_last_containers", float64(a.Actions[act]), "action", act)
	}
}

func renderBuilds(b *bytes.Buffer, builds []Build) {
	if builds == nil {
		return
	}
	builds = slices.Clone(builds)
	slices.SortFunc(builds, func(x, y Build) int { return strings.Compare(x.Module, y.Module) })
	header(b, "meshctl_build_current_info", "The module's current build, by its id (1 while it is current).")
	for _, bd := range builds {
		if bd.Current != "" {
			sample(b, "meshctl_build_current_info", 1, "module", bd.Module, "build", bd.Current)
		}
	}
	header(b, "meshctl_build_current_requested_timestamp_seconds", "When the module's current build was requested, in seconds since the epoch (its age: time() minus this).")
	for _, bd := range builds {
		if bd.Current != "" && !bd.RequestedAt.IsZero() {
			sample(b, "meshctl_build_current_requested_timestamp_seconds", seconds(bd.RequestedAt), "module", bd.Module)
		}
	}
	header(b, "meshctl_build_pending", "The module's builds requested and not yet recorded.")
	for _, bd := range builds {
		sample(b, "meshctl_build_pending", float64(bd.Pending), "module", bd.Module)
	}
}

func header(b *bytes.Buffer, name, help string) {
	fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, escapeHelp(help), name)
}

// sample writes one sample. labels are name, value pairs.
func sample(b *bytes.Buffer, name string, v float64, labels ...string) {
	b.WriteString(name)
	if len(labels) > 0 {
		b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(b, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
		}
		b.WriteByte('}')
	}
	fmt.Fprintf(b, " %s\n", formatValue(v))
}

func formatValue(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.3f", v)
}

func seconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
func escapeHelp(s string) string  { return helpEscaper.Replace(s) }

// Write renders s into path atomically. It writes a temp file in the same
// directory, fsyncs it and renames it over path, then fsyncs the directory.
// The temp file's name has a leading dot and no .prom suffix, so the
// collector skips it.
func Write(path string, s Snapshot) error {
	if !strings.HasSuffix(path, ".prom") {
		return fmt.Errorf("metrics file %s: its name must end in .prom, which node_exporter's textfile collector reads", path)
	}
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("metrics file: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if _, err := tmp.Write(Render(s)); err != nil {
		tmp.Close()
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	// The collector runs as another user (node_exporter). So the file is
	// readable by all, as it carries no secret.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("metrics file %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
