package eventcheck

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Down returns the times the events show module down on one engine. It is
// down while some service of it has no copy up, after one was up. A copy is
// up from its start, or from its first healthy report when it has a
// healthcheck, to its die. A copy that stops before any start of it was up as the
// record began (a rename may come first). A service never up is not down:
// it is being created.
func Down(events []Event, module string) []Interval {
	healthchecked := map[string]bool{}
	for _, e := range events {
		if e.Action == "health_status" {
			healthchecked[e.ID] = true
		}
	}
	up := map[string]map[string]bool{} // service: its copies up
	before := map[string]bool{}        // ids there before the record, not seen to stop yet
	var out []Interval
	var open *Interval
	down := func() []string {
		var ds []string
		for s, ids := range up {
			if len(ids) == 0 {
				ds = append(ds, s)
			}
		}
		slices.Sort(ds)
		return ds
	}
	for _, e := range events {
		if e.Labels[labelModule] != module || e.Labels[labelRole] == roleStep {
			continue
		}
		s := Service(e.Name, e.Labels)
		if _, ok := before[e.ID]; !ok {
			before[e.ID] = e.Action != "create" && e.Action != "start"
		}
		if before[e.ID] && (e.Action == "kill" || e.Action == "stop" || e.Action == "die") {
			// It was there as the record began, and runs until now.
			before[e.ID] = false
			if up[s] == nil {
				up[s] = map[string]bool{}
			}
			up[s][e.ID] = true
		}
		if e.Action == "start" {
			before[e.ID] = false
		}
		switch {
		case e.Action == "start" && !healthchecked[e.ID], e.Action == "health_status" && e.Detail == "healthy":
			if up[s] == nil {
				up[s] = map[string]bool{}
			}
			up[s][e.ID] = true
		case e.Action == "die", e.Action == "health_status" && e.Detail != "healthy":
			delete(up[s], e.ID)
		default:
			continue
		}
		switch ds := down(); {
		case len(ds) > 0 && open == nil:
			open = &Interval{Name: strings.Join(ds, ","), Service: module, Start: e.At}
		case len(ds) == 0 && open != nil:
			open.End = e.At
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil {
		out = append(out, *open)
	}
	return out
}

// MostDown returns the most hosts down at one instant, by each host's Down
// intervals, and the first instant that many were.
func MostDown(hosts map[string][]Interval) (int, time.Time, []string) {
	type edge struct {
		at   time.Time
		up   bool
		host string
	}
	var edges []edge
	for h, ivs := range hosts {
		for _, iv := range ivs {
			edges = append(edges, edge{iv.Start, false, h})
			if !iv.End.IsZero() {
				edges = append(edges, edge{iv.End, true, h})
			}
		}
	}
	// At one instant, a host coming back counts before another going down.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		if a.up != b.up {
			if a.up {
				return -1
			}
			return 1
		}
		return strings.Compare(a.host, b.host)
	})
	most, at, cur := 0, time.Time{}, map[string]bool{}
	var which []string
	for _, e := range edges {
		if e.up {
			delete(cur, e.host)
			continue
		}
		cur[e.host] = true
		if len(cur) > most {
			most, at = len(cur), e.at
			which = which[:0]
			for h := range cur {
				which = append(which, h)
			}
			slices.Sort(which)
		}
	}
	return most, at, which
}

// DownString lists a host's down intervals, one a line.
func DownString(host string, ivs []Interval) string {
	var b strings.Builder
	for _, iv := range ivs {
		end := "still down"
		if !iv.End.IsZero() {
			end = iv.End.Format("15:04:05.000")
		}
		fmt.Fprintf(&b, "%s: %s down %s..%s (%s)\n", host, iv.Service, iv.Start.Format("15:04:05.000"), end, iv.Name)
	}
	return b.String()
}

// Existing returns the times the containers of module that were there as
// the record began ran: each from the record's start (a zero Start) to its
// first die, then as Intervals counts. A step's container is not one of
// them. A mesh window's check compares them with the step's run.
func Existing(events []Event, module string) []Interval {
	first := map[string]string{} // id: its first action
	for _, e := range events {
		if _, ok := first[e.ID]; !ok {
			first[e.ID] = e.Action
		}
	}
	var out []Interval
	open := map[string]*Interval{}
	ran := map[string]bool{} // ids whose pre-record run is accounted
	for _, e := range events {
		if e.Labels[labelModule] != module || e.Labels[labelRole] == roleStep || first[e.ID] == "create" {
			continue
		}
		switch e.Action {
		case "start":
			ran[e.ID] = true
			if open[e.ID] == nil {
				open[e.ID] = &Interval{ID: e.ID, Name: e.Name, Service: Service(e.Name, e.Labels), Start: e.At}
			}
		case "die":
			iv := open[e.ID]
			if iv == nil && !ran[e.ID] {
				iv = &Interval{ID: e.ID, Name: e.Name, Service: Service(e.Name, e.Labels)}
			}
			ran[e.ID] = true
			if iv != nil {
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
