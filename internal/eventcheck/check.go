package eventcheck

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// meshctl's labels and names, spelled here rather than imported. The checker
// must not share a mistake with the code it checks.
const (
	labelModule    = "io.meshctl.module"
	labelContainer = "io.meshctl.container"
	labelRole      = "io.meshctl.role"
	roleStep       = "step"
	asideSuffix    = ".meshctl-old"
	stepPrefix     = "meshctl-window."
)

// Service names the service a container is a copy of. It reads
// "MODULE.CONTAINER" from meshctl's labels. A container without them was
// started by hand, and its service is its name without a ".meshctl-old"
// suffix. A `run:` step's container is "step:MODULE.STEP".
func Service(name string, labels map[string]string) string {
	if labels[labelRole] == roleStep || strings.HasPrefix(name, stepPrefix) {
		return "step:" + strings.TrimPrefix(name, stepPrefix)
	}
	if m, c := labels[labelModule], labels[labelContainer]; m != "" && c != "" {
		return m + "." + c
	}
	return strings.TrimSuffix(name, asideSuffix)
}

// Interval is a time a container ran, from a start event to the die event
// that followed it. End is zero when it still ran as the record ended.
type Interval struct {
	ID, Name, Service string
	Foreign           bool // without meshctl's labels
	Start, End        time.Time
}

// overlaps reports whether a and b ran at a common instant.
func (a Interval) overlaps(b Interval) bool {
	return before(a.Start, b.End) && before(b.Start, a.End)
}

// before reports t < end, a zero end being the open future.
func before(t, end time.Time) bool { return end.IsZero() || t.Before(end) }

func (a Interval) String() string {
	end := "still running"
	if !a.End.IsZero() {
		end = a.End.Format("15:04:05.000")
	}
	kind := ""
	if a.Foreign {
		kind = " (foreign)"
	}
	return fmt.Sprintf("%s %.12s%s %s..%s", a.Name, a.ID, kind, a.Start.Format("15:04:05.000"), end)
}

// Intervals returns every time a container ran, by the events, in order of
// start.
func Intervals(events []Event) []Interval {
	open := map[string]*Interval{}
	var out []Interval
	for _, e := range events {
		switch e.Action {
		case "start":
			if open[e.ID] == nil {
				_, managed := e.Labels[labelModule]
				open[e.ID] = &Interval{ID: e.ID, Name: e.Name, Service: Service(e.Name, e.Labels), Foreign: !managed, Start: e.At}
			}
		case "die":
			if iv := open[e.ID]; iv != nil {
				iv.End = e.At
				out = append(out, *iv)
				delete(open, e.ID)
			}
		}
	}
	for _, iv := range open {
		out = append(out, *iv)
	}
	slices.SortFunc(out, func(a, b Interval) int { return a.Start.Compare(b.Start) })
	return out
}

// Violation is a property the events show broken.
type Violation struct {
	Property string // "two-running", "held-during-step"
	Detail   string
}

func (v Violation) String() string { return v.Property + ": " + v.Detail }

// TwoRunning finds every instant two containers of one service ran at once.
// They may be a new and an old copy, or a foreign one under the name.
func TwoRunning(ivs []Interval) []Violation {
	var out []Violation
	for i, a := range ivs {
		if strings.HasPrefix(a.Service, "step:") {
			continue
		}
		for _, b := range ivs[i+1:] {
			if b.Service == a.Service && b.ID != a.ID && a.overlaps(b) {
				out = append(out, Violation{"two-running", fmt.Sprintf("%s: %s and %s ran at once", a.Service, a, b)})
			}
		}
	}
	return out
}

// HeldDuringStep finds every time a container of a held service ran while a
// step ran. steps are the step's own intervals. Those are StepIntervals for a
// `run:` step, and marker times for an `exec:` step. held lists the services
// the step holds ("MODULE.CONTAINER").
func HeldDuringStep(ivs []Interval, steps []Interval, held []string) []Violation {
	var out []Violation
	for _, s := range steps {
		for _, iv := range ivs {
			if slices.Contains(held, iv.Service) && iv.overlaps(s) {
				out = append(out, Violation{"held-during-step", fmt.Sprintf("%s ran while step %s ran", iv, s)})
			}
		}
	}
	return out
}

// StepIntervals returns the intervals of the `run:` step container of module
// and step.
func StepIntervals(ivs []Interval, module, step string) []Interval {
	var out []Interval
	for _, iv := range ivs {
		if iv.Service == "step:"+module+"."+step {
			out = append(out, iv)
		}
	}
	return out
}
