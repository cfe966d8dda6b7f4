package harness

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/pkg/engine"
)

// verify heals the host with one apply without faults and checks it: the
// apply's exit status, the host against the file, and the engine's events
// of the whole iteration.
func (r *fltRun) verify() {
	settle := r.settle
	if settle == "" {
		settle = "1s"
	}
	res := r.run(false, "apply", "-f", r.file, "--settle", settle)
	if res.code != r.finalExit {
		r.t.Errorf("the healing apply exited %d, want %d\n%s%s", res.code, r.finalExit, res.stdout, res.stderr)
	}
	r.checkHost()
	r.checkAfterApply("after the healing apply")
	if r.finalExit == 0 {
		if p := r.problems(); len(p) > 0 {
			r.t.Errorf("after the healing apply status --check reports:\n%s", strings.Join(p, "\n"))
		}
	}
	r.checkEvents()
}

// checkHost checks that the host is what the file asks for: one container
// of the service, the last good version, running with its restart policy,
// nothing left aside, and no window left open.
func (r *fltRun) checkHost() {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	for _, name := range r.services() {
		r.checkServiceHealed(ctx, name)
	}
	name := r.module + ".svc"
	list, err := r.g.m.Eng.List(ctx, map[string]string{"io.meshctl.module": r.module})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, c := range list {
		if !slices.Contains(r.services(), c.Name) && c.Name != r.module+".side" && c.Running {
			r.t.Errorf("after the healing apply %s (%s) runs beside %s", c.Name, c.State, name)
		}
	}
	r.checkNoWindow()
}

// checkServiceHealed checks one service after the healing apply: the last
// good version runs under its name with its restart policy, nothing is
// left aside, and it saw the content its secret file has.
func (r *fltRun) checkServiceHealed(ctx context.Context, name string) {
	x, err := r.g.m.Eng.Inspect(ctx, name)
	switch {
	case r.want == "":
		// Nothing good was ever applied: the service must not run.
		if err == nil && x.Running {
			r.t.Errorf("after the healing apply %s runs (%s, version %q), and no version of it ever passed", name, x.State, x.Labels["flt.version"])
		}
	case err != nil:
		r.t.Errorf("after the healing apply: %s: %v", name, err)
	case x.Labels["flt.version"] != r.want:
		r.t.Errorf("after the healing apply %s is version %q, want %q (the last good one)", name, x.Labels["flt.version"], r.want)
	case x.State != "running" || x.Restarting || x.RestartPolicy != "always":
		r.t.Errorf("after the healing apply %s is %s (restarting %v) with restart policy %q, want running with always", name, x.State, x.Restarting, x.RestartPolicy)
	case name == r.module+".svc" && r.ver.Secret != "":
		r.checkSeen(x, "after the healing apply")
	}
	if _, err := r.g.m.Eng.Inspect(ctx, name+".meshctl-old"); !engine.IsNotFound(err) {
		r.t.Errorf("after the healing apply %s.meshctl-old is still there (%v)", name, err)
	}
}

// problems returns the lines of status --check about the module's
// containers. The rig's state directory also holds the records of
// earlier iterations, whose containers are gone. A window that failed
// under a fault is rightly reported; it is not the containers' problem.
func (r *fltRun) problems() []string {
	res := r.run(false, "status", "--check")
	var out []string
	for _, l := range strings.Split(res.stdout, "\n") {
		if strings.HasPrefix(l, "window ") {
			continue
		}
		if strings.Contains(l, r.module+".") || strings.Contains(l, " "+r.module+":") || strings.Contains(l, " "+r.module+" ") {
			out = append(out, l)
		}
	}
	return out
}

// checkNoWindow checks that window list shows no window of the module
// still open (nor a hold of it).
func (r *fltRun) checkNoWindow() {
	res := r.run(false, "window", "list", "-o", "json")
	var list struct {
		Windows []struct {
			ID, Module, State string
		} `json:"windows"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &list); err != nil {
		r.t.Errorf("window list -o json: %v\n%s%s", err, res.stdout, res.stderr)
		return
	}
	for _, w := range list.Windows {
		if w.Module == r.module {
			r.t.Errorf("after the healing apply window %s on %s is still listed %s", w.ID, w.Module, w.State)
		}
	}
}

// checkEvents checks the engine's events of the module: never two copies of
// its service running at once, its held service never running while a
// step of a window ran, and the engine left alone where nothing was to
// change it.
func (r *fltRun) checkEvents() {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	if err := r.g.rec.Sync(ctx, "meshtest/busybox:1"); err != nil {
		r.t.Fatal(err)
	}
	var events []eventcheck.Event
	for _, e := range r.g.rec.Events() {
		if mine(r.module, eventcheck.Service(e.Name, e.Labels)) {
			events = append(events, e)
		}
	}
	ivs := eventcheck.Intervals(events)
	// Start-first runs two copies by design; its alias is checked instead
	// (checkOneOnAlias).
	if !r.ver.StartFirst {
		for _, v := range eventcheck.TwoRunning(ivs) {
			r.t.Error(v)
		}
	}
	for _, w := range r.windows {
		if w.changed {
			continue // its copy runs through the step; TwoRunning checks the switches
		}
		steps := eventcheck.StepIntervals(ivs, r.module, w.step)
		if w.exec {
			steps = r.markIntervals()
		}
		for _, v := range eventcheck.HeldDuringStep(ivs, steps, []string{r.module + ".svc"}) {
			r.t.Error(v)
		}
	}
	for _, span := range r.quiet {
		for _, e := range events {
			if !e.At.Before(span[0]) && !e.At.After(span[1]) && e.Action != "exec_create" && e.Action != "exec_start" && e.Action != "exec_die" && e.Action != "health_status" {
				r.t.Errorf("the engine did %s to %s while only status ran", e.Action, e.Name)
			}
		}
	}
}

// mine reports whether a service (eventcheck.Service) is the module's.
func mine(module, service string) bool {
	return strings.HasPrefix(service, module+".") || strings.HasPrefix(service, "step:"+module+".")
}

// markIntervals reads the exec: step's marks: a start and an end line per
// step that ran; a step killed before its end counts for its start instant.
func (r *fltRun) markIntervals() []eventcheck.Interval {
	data, err := os.ReadFile(r.marks)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		r.t.Fatal(err)
	}
	var marks []time.Time
	for _, l := range strings.Fields(string(data)) {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil {
			r.t.Fatalf("marks %s: %q", r.marks, l)
		}
		marks = append(marks, time.Unix(0, n))
	}
	var out []eventcheck.Interval
	for i := 0; i < len(marks); i += 2 {
		iv := eventcheck.Interval{Name: "exec step", Start: marks[i], End: marks[i].Add(time.Nanosecond)}
		if i+1 < len(marks) {
			iv.End = marks[i+1]
		}
		out = append(out, iv)
	}
	return out
}
