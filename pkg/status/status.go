package status

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
)

// Container states. Running, Restarting and Stopped are engine.StateOf's.
const (
	Running    = string(engine.Running)
	Restarting = string(engine.Restarting)
	Stopped    = string(engine.Stopped)
	Held       = "held"
	Missing    = "missing"
	Drifted    = "drifted"
)

// Report is the status of a host.
type Report struct {
	// Summary is one line. It is "ok", "working: window w-… open", or what is
	// wrong.
	Summary    string            `json:"summary"`
	Containers []Container       `json:"containers"`
	Windows    []window.OpenView `json:"windows"`
	Builds     []Build           `json:"builds"`
	LastApply  *LastApply        `json:"last_apply"`
	// Changing are the live applies' claims: work in progress, with the time
	// past which a claim may be stuck.
	Changing []Changing `json:"changing"`
	// FailedWindows hold the last window of each module and step, when it
	// did not end ok. Such a window failed, timed out, was interrupted, or
	// was released stale.
	FailedWindows []coord.Entry `json:"failed_windows"`
	// Problems are what needs a person, one line each (status --check).
	Problems []string `json:"problems"`
}

// Container is one managed or desired container.
type Container struct {
	Name   string `json:"name"`
	Module string `json:"module"`
	State  string `json:"state"`
	// Window is the window that holds the container, "" when none. Every key
	// is always there (CONTRACT §8), so a reader needs no check.
	Window  string   `json:"window"`
	Reasons []string `json:"reasons"`
	// Health is what the engine says of a running container's healthcheck. It
	// is starting, healthy or unhealthy, or "" without one. A held container
	// reads "". For a stopped container, the engine's "unhealthy" means
	// nothing.
	Health string `json:"health"`
	// Changing is set while a live apply changes the container, within its
	// claim's bound: its state is work in progress, not a problem.
	Changing bool `json:"changing"`
}

// Build is a module's current build.
type Build struct {
	Module string `json:"module"`
	ID     string `json:"id"`
	Image  string `json:"image"`
}

// LastApply is when the last apply finished and how.
type LastApply struct {
	FinishedAt time.Time     `json:"finished_at"`
	Result     record.Result `json:"result"`
	Source     string        `json:"source"`
	Error      string        `json:"error,omitempty"`
}

// Get reads the state directory's snapshots, without a lock. It lists the
// managed containers in one engine call. current reads a module's current
// build, from the ledger the command is configured with.
//
// Get creates nothing, not even the state directory's identity. A state
// directory that does not exist (state.Peek) reads as nothing applied yet.
// That holds once the engine answers a ping. An unreachable engine is still a
// failure.
//
// m is asked about each dead window's mesh hold (coord.ObserveMesh). Only
// such a hold makes Get contact etcd. Get records no step's end: the next
// apply or window run does.
func Get(ctx context.Context, d *state.Dir, eng engine.Client, now time.Time, current func(module string) (ledger.Build, bool, error),
	m coord.Mesh) (*Report, error) {
	if !d.Exists() {
		if err := eng.Ping(ctx); err != nil {
			return nil, err
		}
		return &Report{Summary: fmt.Sprintf("no state directory at %s: nothing applied yet", d.Path()),
			Containers: []Container{}, Windows: []window.OpenView{}, Builds: []Build{}, Changing: []Changing{},
			FailedWindows: []coord.Entry{}, Problems: []string{}}, nil
	}
	app, appliedOK, err := record.LoadApplied(d)
	if err != nil {
		return nil, err
	}
	// A module whose env-file cannot be read is reported, not the end of
	// the report. The other modules' status does not depend on its files.
	desired, unreadable, err := app.DesiredFor(d, "")
	if err != nil {
		return nil, err
	}
	scope, err := lifecycle.PeekScope(d)
	if err != nil {
		return nil, err
	}
	// Window locks first, then the one engine listing. The dead windows are
	// reported, not released, since status changes nothing.
	ws, err := coord.ObserveMesh(ctx, d, d.Read, eng, scope, now, m)
	if le := (*coord.ListingError)(nil); errors.As(err, &le) {
		return nil, le.Err
	}
	if err != nil {
		return nil, err
	}
	byName := map[string]engine.Container{}
	for _, c := range ws.Observed {
		if !lifecycle.IsStep(c, scope) {
			byName[c.Name] = c
		}
	}
	rep := &Report{Containers: []Container{}, Builds: []Build{},
		FailedWindows: failedWindows(ws.History.Windows, app.HasStep), Problems: []string{}}
	if rep.Changing, err = changing(d, desired, now); err != nil {
		return nil, err
	}
	heldBy := map[string]coord.View{}
	var views []coord.View
	for _, c := range ws.Classified {
		v := c.View()
		views = append(views, v)
		if coord.Honoured(c.State) {
			for _, n := range c.Containers {
				heldBy[n] = v
				if v.IsChanged(n) {
					// The normal one, aside, is part of the hold.
					heldBy[lifecycle.HeldName(n)] = v
				}
			}
		}
	}
	// A live log that cannot be read costs its window's progress, not the report.
	rep.Windows = window.Progress(d, views, now, func(string, ...any) {})

	modules := containers(rep, desired, byName, heldBy, unreadable, now)
	markChanging(rep)
	if rep.Builds, err = builds(modules, current); err != nil {
		return nil, err
	}
	if rep.LastApply, err = lastApply(d); err != nil {
		return nil, err
	}
	rep.Problems = append(append(problems(rep), stalled(rep.Windows, now)...), slotsPastBound(d, now)...)
	for _, m := range slices.Sorted(maps.Keys(unreadable)) {
		rep.Problems = append(rep.Problems, fmt.Sprintf("module %s: its containers cannot be checked: %s; fix it, then meshctl apply --last", m, firstLine(unreadable[m].Error())))
	}
	rep.Summary = summary(rep)
	if !appliedOK && rep.LastApply == nil && len(rep.Containers) == 0 && len(rep.Windows) == 0 {
		rep.Summary = fmt.Sprintf("state directory %s is empty: nothing applied yet", d.Path())
	}
	return rep, nil
}

// containers fills rep.Containers, in name order. It lists every desired
// container, and every managed one the applied state does not name. It
// returns the modules whose builds the report shows. Those are the desired
// containers' modules and the artifacts they run.
func containers(rep *Report, desired []lifecycle.Desired, byName map[string]engine.Container, heldBy map[string]coord.View, unreadable map[string]error, now time.Time) map[string]bool {
	seen := map[string]bool{}
	modules := map[string]bool{}
	for i := range desired {
		dc := &desired[i]
		seen[dc.Name] = true
		modules[dc.Module] = true
		if dc.Def.Artifact != "" {
			modules[dc.Def.Artifact] = true
		}
		var c *engine.Container
		if o, ok := byName[dc.Name]; ok {
			c = &o
		}
		rep.Containers = append(rep.Containers, containerState(dc.Name, dc.Module, c, dc, heldBy, now))
	}
	for name, c := range byName {
		if !seen[name] {
			module := c.Labels[lifecycle.LabelModule]
			st := containerState(name, module, &c, nil, heldBy, now)
			if _, aside := lifecycle.HeldOf(name); aside && st.State == Held {
				rep.Containers = append(rep.Containers, st) // part of a changed hold
				continue
			}
			if _, ok := unreadable[module]; ok {
				st.Reasons = append(st.Reasons, "not checked: its module's applied spec cannot be read")
			} else {
				st.Reasons = append(st.Reasons, "not in the applied mesh file")
			}
			rep.Containers = append(rep.Containers, st)
		}
	}
	sort.Slice(rep.Containers, func(i, j int) bool { return rep.Containers[i].Name < rep.Containers[j].Name })
	return modules
}

// builds returns the current build of each module that has one, in name
// order.
func builds(modules map[string]bool, current func(module string) (ledger.Build, bool, error)) ([]Build, error) {
	out := []Build{}
	for _, m := range slices.Sorted(maps.Keys(modules)) {
		b, ok, err := current(m)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, Build{Module: m, ID: b.ID, Image: b.Image})
		}
	}
	return out, nil
}

// failedWindows returns the last window of the history for each module and
// step the applied state still has. The history is oldest first. A window is
// returned when it did not end ok and no one acknowledged it (meshctl window
// ack).
func failedWindows(hist []coord.Entry, hasStep func(module, step string) bool) []coord.Entry {
	last := map[string]coord.Entry{}
	for _, e := range hist {
		last[e.Module+"/"+e.Step] = e
	}
	out := []coord.Entry{}
	for _, k := range slices.Sorted(maps.Keys(last)) {
		if e := last[k]; e.Failed() && e.AckedAt == nil && hasStep(e.Module, e.Step) {
			out = append(out, e)
		}
	}
	return out
}

// problems lists what needs a person. That is a failed last apply or
// window, a stale hold, or an overdue window. It is also a container that
// no window holds and that drifted, restarts or does not run. Each line
// says what to do.
func problems(rep *Report) []string {
	out := []string{}
	if l := rep.LastApply; l != nil && l.Result != record.ResultOK {
		msg := fmt.Sprintf("the last apply failed (%s, %s)", state.When(l.FinishedAt), l.Source)
		if l.Error != "" {
			msg += ": " + firstLine(l.Error)
		}
		out = append(out, msg+"; fix it and apply again (meshctl apply --last re-applies the applied state)")
	}
	for _, e := range rep.FailedWindows {
		msg := fmt.Sprintf("window %s %s/%s ended %s at %s", e.ID, e.Module, e.Step, e.Result, state.When(e.ClosedAt))
		if e.Error != "" {
			msg += ": " + firstLine(e.Error)
		}
		// A window released stale kept no step log: its process died before
		// its close, so window logs would only say so.
		if e.Result == coord.Stale {
			out = append(out, msg+fmt.Sprintf("; it kept no step log: meshctl window ack %s once a person has looked", e.ID))
			continue
		}
		out = append(out, msg+fmt.Sprintf("; see meshctl window logs %s, then meshctl window ack %s", e.ID, e.ID))
	}
	for _, w := range rep.Windows {
		switch w.State {
		case coord.Stale:
			out = append(out, fmt.Sprintf("window %s %s/%s is stale (its process is gone): meshctl apply --last releases it and brings %s back", w.ID, w.Module, w.Step, strings.Join(w.Containers, ", ")))
		case coord.Overdue:
			out = append(out, fmt.Sprintf("window %s %s/%s is overdue (deadline %s): its step runs past its timeout", w.ID, w.Module, w.Step, state.When(w.Deadline)))
		case coord.Orphaned, coord.Unknown:
			// A dead mesh window's hold: it may stay long, and a person
			// may have to act on another host.
			if w.Why() != "" {
				out = append(out, fmt.Sprintf("window %s %s/%s is %s: its process is gone; %s; %s", w.ID, w.Module, w.Step, w.State, w.Why(), w.ToDo()))
			}
		}
	}
	out = append(out, stuckClaims(rep.Changing)...)
	out = append(out, leftovers(rep.Containers)...)
	for _, c := range rep.Containers {
		_, aside := lifecycle.HeldOf(c.Name)
		if _, ok := leftoverOf(c.Name); c.Changing || ok || aside {
			continue
		}
		if c.State == Running && c.Health == "unhealthy" {
			out = append(out, fmt.Sprintf("container %s runs but is unhealthy; see docker logs %s", c.Name, c.Name))
		}
		switch c.State {
		case Restarting:
			out = append(out, fmt.Sprintf("container %s is restarting: it exits and the engine starts it again; see docker logs %s", c.Name, c.Name))
		case Drifted, Missing, Stopped:
			msg := fmt.Sprintf("container %s is %s", c.Name, c.State)
			if len(c.Reasons) > 0 {
				msg += " (" + strings.Join(c.Reasons, ", ") + ")"
			}
			out = append(out, msg+"; meshctl apply --last converges it")
		}
	}
	return out
}

// lastApply reads the last apply's time and result, nil before any.
func lastApply(d *state.Dir) (*LastApply, error) {
	var last record.LastReport
	if ok, err := d.Read(record.ReportFile, &last); err != nil || !ok {
		return nil, err
	}
	return &LastApply{FinishedAt: last.FinishedAt, Result: last.Result, Source: last.Source, Error: last.Error}, nil
}

// slotsPastBound lists the slots of the mesh's budgets that this host has
// held past their deadline. The slot's start plus, over its containers,
// the stop grace, gate bound and drain is that deadline. Other hosts'
// applies of the module wait for such a slot. It reads the host's record
// of them, so it needs no etcd. A record that cannot be read is a problem
// too.
func slotsPastBound(d *state.Dir, now time.Time) []string {
	slots, err := coord.RecordedSlots(d)
	if err != nil {
		return []string{fmt.Sprintf("%v; the slots of max-unavailable this host holds cannot be checked", err)}
	}
	var out []string
	for _, s := range slots {
		if now.After(s.Deadline) {
			out = append(out, fmt.Sprintf("module %s: host %s has held its slot of the mesh's budget since %s (pid %d), past its bound (%s): other hosts' applies of it wait; meshctl apply --last gives it back once %s runs healthy, or meshctl mesh release %s %s",
				s.Module, s.Host, state.When(s.TakenAt), s.PID, state.When(s.Deadline), s.Module, s.Module, s.Host))
		}
	}
	return out
}

// stalled lists the windows whose running step has printed nothing for
// its stall-after, as problems. A sweep that prints a line per blob and
// falls silent may be stuck, so a person looks.
func stalled(ws []window.OpenView, now time.Time) []string {
	out := []string{}
	for _, w := range ws {
		since, after, ok := w.Stalled(now)
		if !ok {
			continue
		}
		msg := fmt.Sprintf("window %s %s/%s: its step has printed nothing since %s (stall-after %s)", w.ID, w.Module, w.Step, state.When(since), after)
		if w.LastLineAt != nil {
			msg += fmt.Sprintf(", its last line: %s", w.LastLine)
		} else {
			msg += ", nothing since it started"
		}
		out = append(out, msg+fmt.Sprintf("; it may be stuck: see meshctl window logs %s", w.ID))
	}
	return out
}

// leftovers lists the containers a recreate left under a temporary name
// as problems. No live apply changes them and no window holds their
// service. One that runs answers beside the service, on its aliases. Each
// line says what the next apply does with it.
func leftovers(cs []Container) []string {
	state := map[string]string{}
	for _, c := range cs {
		state[c.Name] = c.State
	}
	var out []string
	for _, c := range cs {
		if base, aside := lifecycle.HeldOf(c.Name); aside && c.State != Held && !c.Changing {
			out = append(out, fmt.Sprintf("container %s is %s, set aside by a window that held %s changed and holds it no more; meshctl apply --last puts it back",
				c.Name, c.State, base))
			continue
		}
		base, ok := leftoverOf(c.Name)
		if !ok || c.Changing || state[base] == Held {
			continue
		}
		fix := "meshctl apply --last removes it"
		switch st, there := state[base]; {
		case strings.HasSuffix(c.Name, lifecycle.NewName("")) || there && st != Missing:
		case c.State == Running:
			fix = "meshctl apply --last puts it back as " + base
		default:
			fix = "meshctl apply --last creates " + base + ", and the apply after it removes this one"
		}
		out = append(out, fmt.Sprintf("container %s is %s, left by a recreate of %s; %s", c.Name, c.State, base, fix))
	}
	return out
}

// leftoverOf says whether name is a temporary name of a recreate. Those are
// NAME.meshctl-new, -old and -retiring. It returns the service's name.
func leftoverOf(name string) (string, bool) {
	if base, ok := lifecycle.AsideOf(name); ok {
		return base, true
	}
	return strings.CutSuffix(name, lifecycle.NewName(""))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// containerState is the state of container name. c is the container as the
// engine has it, nil when missing. d is the container as the applied state
// wants it, nil when not in it.
func containerState(name, module string, c *engine.Container, d *lifecycle.Desired, heldBy map[string]coord.View, now time.Time) Container {
	st := Container{Name: name, Module: module}
	if v, ok := heldBy[name]; ok {
		st.State, st.Window = Held, v.ID
		st.Reasons = []string{heldReason(name, v)}
		return st
	}
	var diff []string
	if c != nil && d != nil {
		diff = lifecycle.SpecDiff(*c, d.Spec)
	}
	switch {
	case c == nil:
		st.State = Missing
	case len(diff) > 0:
		st.State, st.Reasons = Drifted, diff
	default:
		st.State = string(engine.StateOf(*c, now))
		if st.State == Running {
			st.Health = c.Health
		}
	}
	return st
}

// heldReason says how window v holds container name: stopped, changed,
// or aside as the normal one of a changed hold.
func heldReason(name string, v coord.View) string {
	window := "window " + v.ID + " " + v.Module + "/" + v.Step + " " + v.State
	if base, aside := lifecycle.HeldOf(name); aside {
		return "the normal " + base + ", aside while " + window + " holds it changed"
	}
	if v.IsChanged(name) {
		return "changed by " + window
	}
	return window
}

func summary(rep *Report) string {
	// A recreate's leftover is never what the last apply wants, running
	// or not.
	bad := len(leftovers(rep.Containers))
	for _, c := range rep.Containers {
		if c.State != Running && c.State != Held && !c.Changing {
			bad++
		}
	}
	var open, applies []string
	for _, c := range rep.Changing {
		if !c.Stuck {
			applies = append(applies, fmt.Sprintf("apply (pid %d) changing %s", c.PID, strings.Join(c.Containers, ", ")))
		}
	}
	for _, w := range rep.Windows {
		if coord.Honoured(w.State) {
			open = append(open, fmt.Sprintf("window %s %s/%s %s", w.ID, w.Module, w.Step, w.State))
		}
	}
	switch {
	case bad > 0:
		return "attention: some containers are not running as the last apply wants; run meshctl apply --last"
	case len(open) > 0:
		return "working: " + strings.Join(append(applies, open...), "; ") + "; its held containers come back when it closes"
	case len(applies) > 0:
		return "working: " + strings.Join(applies, "; ")
	case rep.LastApply != nil && rep.LastApply.Result != record.ResultOK:
		return "attention: the last apply failed"
	case len(rep.FailedWindows) > 0:
		return "attention: a window failed"
	default:
		return "ok"
	}
}
