package cli

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/metrics"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/spf13/cobra"
)

// metricsKey is the annotation of a command that writes the metrics file
// (--metrics-file) after it ran. Such a command changes what the file
// reports. status writes it too, since a stale hold needs its
// classification of the holds.
const metricsKey = "writes-metrics"

// writesMetrics marks cmd as one that writes the metrics file.
func writesMetrics(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[metricsKey] = "yes"
	return cmd
}

// metricsWait bounds the whole metrics write. A file for a collector must
// never hold up a command, nor outlive its signal by long.
const metricsWait = 3 * time.Second

// writeMetrics writes the metrics file after cmd, when one is configured and
// cmd is one that writes it. It runs whatever the command's outcome, since a
// failed apply changes the file too. It runs on a context of its own made
// now, bounded by metricsWait. A failure is a warning, never the command's.
func (e *Env) writeMetrics(cmd *cobra.Command) {
	path := e.Global.MetricsFile
	if path == "" || cmd == nil || cmd.Annotations[metricsKey] == "" || !e.preRun {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), metricsWait)
	defer cancel()
	snap, err := e.gatherMetrics(ctx)
	if err == nil {
		err = metrics.Write(path, snap)
	}
	if err != nil {
		e.Warnf("metrics file %s not written: %v", path, err)
	}
}

// gatherMetrics reads what the metrics file reports from the state
// directory and the ledger. It reads snapshots, with no state lock.
func (e *Env) gatherMetrics(ctx context.Context) (metrics.Snapshot, error) {
	snap := metrics.Snapshot{Holds: map[string]int{}, Held: map[string]int{}}
	d, err := e.StateReadOnly()
	if err != nil || !d.Exists() {
		return snap, err
	}
	// Each hold's state as status gives it (coord.ClassifySnapshot). An
	// engine that cannot be had leaves a dead window's hold unknown.
	classified, hist, _, err := coord.ClassifySnapshot(ctx, d, e.Engine, e.Now())
	if err != nil {
		return snap, err
	}
	// A step the applied state no longer has is left out, as status --check
	// forgets it. Its last window would otherwise alert for ever.
	app, _, err := record.LoadApplied(d)
	if err != nil {
		return snap, err
	}
	for _, w := range hist.Windows {
		if app.HasStep(w.Module, w.Step) {
			snap.Windows = append(snap.Windows, w)
		}
	}
	for _, c := range classified {
		snap.Holds[c.State]++
		if !coord.Honoured(c.State) {
			continue
		}
		for _, name := range c.Containers {
			if _, changed := c.ChangedOf(name); changed {
				snap.Held["changed"]++
			} else {
				snap.Held["stopped"]++
			}
		}
	}
	var last record.LastReport
	if ok, err := d.Read(record.ReportFile, &last); err != nil {
		return snap, err
	} else if ok {
		snap.Apply = lastApplyMetrics(last)
	}
	snap.Builds = e.buildMetrics(ctx)
	return snap, nil
}

// lastApplyMetrics is the last apply's outcome, its containers counted by
// action.
func lastApplyMetrics(last record.LastReport) *metrics.Apply {
	a := &metrics.Apply{FinishedAt: last.FinishedAt, OK: last.Result == record.ResultOK, Actions: map[string]int{}}
	if last.Report != nil {
		for _, c := range last.Report.Containers {
			a.Actions[string(c.Action)]++
		}
	}
	return a
}

// buildMetrics returns each module of the ledger with its current build and
// pending count. It returns nil, and no build metrics are written, when the
// ledger cannot be read within the metrics' bound.
func (e *Env) buildMetrics(ctx context.Context) []metrics.Build {
	l, err := openLedger(e)
	if err != nil {
		e.Log.Debug("metrics: ledger not read", "err", err)
		return nil
	}
	defer l.Close()
	builds, err := l.List(ctx, "")
	if err != nil {
		e.Log.Debug("metrics: ledger not read", "err", err)
		return nil
	}
	pending := map[string]int{}
	var out []metrics.Build
	for _, b := range builds {
		n, seen := pending[b.Module]
		if !seen {
			out = append(out, metrics.Build{Module: b.Module})
		}
		if b.State == ledger.StatePending {
			n++
		}
		pending[b.Module] = n
	}
	for i := range out {
		out[i].Pending = pending[out[i].Module]
		b, ok, err := l.CurrentBuild(ctx, out[i].Module)
		if err != nil {
			e.Log.Debug("metrics: ledger not read", "err", err)
			return nil
		}
		if ok {
			out[i].Current, out[i].RequestedAt = b.ID, b.RequestedAt
		}
	}
	return out
}
