package coord

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// HistoryLimit is how many closed windows the history keeps.
const HistoryLimit = 200

// Hold is one open window's record.
type Hold struct {
	ID     string `json:"id"`
	Module string `json:"module"`
	Step   string `json:"step"`
	PID    int    `json:"pid"`
	// Containers are the engine names of the held containers.
	Containers []string `json:"containers"`
	// Restart is each held container's restart policy before the window. The
	// close sets it back.
	Restart  map[string]string `json:"restart,omitempty"`
	OpenedAt time.Time         `json:"opened_at"`
	Deadline time.Time         `json:"deadline"`
	// StepContainer is the engine name of a run step's one-off container.
	StepContainer string `json:"step_container,omitempty"`
	// StepGroup is the process group an exec step runs in on this host, its
	// guard's. A window that died while processes of it still run is
	// orphaned, as one whose step container runs.
	StepGroup int `json:"step_group,omitempty"`
	// Deferred are the containers whose change an apply reported deferred
	// during this window. The close recreates these, and only these. Each
	// is held, or depends on a held one.
	Deferred []string `json:"deferred,omitempty"`
	// Changed are the held containers that run changed, by engine name.
	// Each is also in Containers, so it counts as held everywhere.
	Changed map[string]Changed `json:"changed,omitempty"`
	// Gathering is the ID of the mesh window (mesh: all) this hold is part
	// of, "" for a window of this host only. A stale hold of one is kept
	// while that gathering's step may run (ledger.Gathering.Over).
	Gathering string `json:"gathering,omitempty"`
	// Runner is the host that runs a mesh window's step.
	Runner string `json:"runner,omitempty"`
}

// Changed is one container a window holds changed (while-changed). The
// changed container runs under the name. The normal one waits aside,
// stopped, as lifecycle.HeldName. It never records an env value.
type Changed struct {
	// ID is the changed container's id, once the open has created it.
	ID string `json:"id,omitempty"`
	// Aside is the normal container's id, "" when there was none.
	Aside string `json:"aside,omitempty"`
	// Spec is the SHA-256 of the normal container's spec label. An apply
	// compares its wish with it, not with the changed container.
	Spec string `json:"spec,omitempty"`
}

// ChangedOf returns how h holds name changed, and whether it does.
func (h Hold) ChangedOf(name string) (Changed, bool) {
	c, ok := h.Changed[name]
	return c, ok
}

// IsChanged reports whether c is the changed copy that window id's hold
// records as ch: by its recorded id, or by the label with the window's id.
// The label names a copy whose create answer was lost.
func IsChanged(c engine.Container, ch Changed, id string) bool {
	return ch.ID != "" && c.ID == ch.ID || c.Labels[lifecycle.LabelWindow] == id && c.Labels[lifecycle.LabelRole] == lifecycle.RoleService
}

// HoldsVersion is the version of the holds file. Version 2 added a hold's
// deferred containers, version 3 its changed ones. An older meshctl
// refuses it and says to upgrade.
const HoldsVersion = 3

// HoldsDoc is the holds file.
type HoldsDoc struct {
	state.Header
	Holds []Hold `json:"holds"`
}

// FormatVersion says the holds file is of HoldsVersion (state.Versioned).
func (*HoldsDoc) FormatVersion() int { return HoldsVersion }

// ReadHolds reads the holds file and the history with read. read is a
// state lock's Read for apply and window, or Dir.Read for a snapshot.
func ReadHolds(read func(string, state.Document) (bool, error)) (HoldsDoc, History, error) {
	var hd HoldsDoc
	var hist History
	if _, err := read(HoldsFile, &hd); err != nil {
		return hd, hist, err
	}
	_, err := read(HistoryFile, &hist)
	return hd, hist, err
}

// Find returns the hold with the given id.
func (d *HoldsDoc) Find(id string) (Hold, bool) {
	for _, h := range d.Holds {
		if h.ID == id {
			return h, true
		}
	}
	return Hold{}, false
}

// Drop removes the hold with the given id.
func (d *HoldsDoc) Drop(id string) {
	out := d.Holds[:0]
	for _, h := range d.Holds {
		if h.ID != id {
			out = append(out, h)
		}
	}
	d.Holds = out
}

// Entry is a closed window in the history.
type Entry struct {
	ID       string    `json:"id"`
	Module   string    `json:"module"`
	Step     string    `json:"step"`
	OpenedAt time.Time `json:"opened_at"`
	ClosedAt time.Time `json:"closed_at"`
	// Result is ok, failed, timeout, interrupted, or stale. Stale means
	// another process released the hold after the window died.
	Result       string `json:"result"`
	StepExitCode *int   `json:"step_exit_code"`
	Error        string `json:"error,omitempty"`
	// AckedAt is when a person acknowledged this window's failure (meshctl
	// window ack). It is then no longer a problem for status --check.
	AckedAt *time.Time `json:"acked_at,omitempty"`
	// Gathering and Runner name a mesh window and the host that ran its
	// step. Both are empty for a window of this host only.
	Gathering string `json:"gathering,omitempty"`
	Runner    string `json:"runner,omitempty"`
}

// Failed reports whether the window did not end ok.
func (e Entry) Failed() bool { return e.Result != "ok" }

// History is the history file, oldest first, at most HistoryLimit
// entries.
type History struct {
	state.Header
	Windows []Entry `json:"windows"`
}

// Has reports whether the history has an entry for window id.
func (h *History) Has(id string) bool {
	for _, e := range h.Windows {
		if e.ID == id {
			return true
		}
	}
	return false
}

// Append adds e, dropping the oldest entries past the limit.
func (h *History) Append(e Entry) {
	h.Windows = append(h.Windows, e)
	if n := len(h.Windows) - HistoryLimit; n > 0 {
		h.Windows = append([]Entry(nil), h.Windows[n:]...)
	}
}

// Window states, as apply, status and window list report them.
const (
	Open     = "open"
	Overdue  = "overdue"  // alive past its deadline, still honoured
	Orphaned = "orphaned" // its process is gone, its step still runs, still honoured
	// Unknown is a window whose process is gone while the engine could not
	// say whether its step container runs. It is still honoured (fail
	// closed).
	Unknown = "unknown"
	Stale   = "stale" // its process is gone and no step runs, so it is released
)

// View is how a hold is reported (CONTRACT §5 and §6).
type View struct {
	ID         string    `json:"id"`
	Module     string    `json:"module"`
	Step       string    `json:"step"`
	State      string    `json:"state"`
	PID        int       `json:"pid"`
	Containers []string  `json:"containers"`
	OpenedAt   time.Time `json:"opened_at"`
	Deadline   time.Time `json:"deadline"`
	// Changed are the held containers that run changed, a subset of
	// Containers. Each one's normal container waits aside, stopped.
	Changed []string `json:"changed,omitempty"`
	// Gathering is the ID of the mesh window the hold is part of, "" for
	// a window of this host only. Runner is the host that runs its step.
	Gathering string `json:"gathering,omitempty"`
	Runner    string `json:"runner,omitempty"`
	// execStep says the step is exec, processes on the host, not a
	// container. Describe words it so.
	execStep bool
	// why says why a mesh hold is in its state. Describe words it. todo
	// says what a person does about it.
	why, todo string
}

// Honoured reports whether a window in this state still holds its
// containers.
func Honoured(st string) bool {
	return st == Open || st == Overdue || st == Orphaned || st == Unknown
}

// StepsFunc lists the step containers that run, once. It returns whether
// a named one does. An error means the engine could not say.
type StepsFunc func() (running func(name string) bool, err error)

// Liveness answers the questions that decide a hold's state. Does the
// window's process live, by its lock? Does its step container run, by
// the engine? For a mesh window's hold, is its step over, by etcd?
type Liveness struct {
	Dir *state.Dir
	// Gathering reads a mesh window's gathering by its ID. Classify calls
	// it only for a dead window's mesh hold whose step does not run here.
	// So a host without such a hold never contacts etcd. Nil means no
	// etcd ledger: such a hold reads unknown.
	Gathering func(module, id string) (ledger.Gathering, bool, error)
	// Host is this host's name in the mesh (--host-name).
	Host string
}

// stateOf classifies h at time now. It reads whether its window lives
// and, for a dead window with a step container, what the engine said.
func stateOf(h Hold, alive bool, running func(string) bool, stepsErr error, now time.Time) string {
	switch {
	case alive && now.After(h.Deadline):
		return Overdue
	case alive:
		return Open
	case h.StepGroup != 0 && groupRuns(h.StepGroup):
		return Orphaned
	case h.StepContainer == "":
		return Stale
	case stepsErr != nil || running == nil:
		return Unknown
	case running(h.StepContainer):
		return Orphaned
	default:
		return Stale
	}
}

// groupRuns reports whether a process of process group pgid still runs.
// The guard kills its group when its window dies, a moment after the
// window's locks are free. A zombie does not run. It waits for its
// reaper, which on a host without a reaping init may be never. When it
// cannot tell, it says the group runs (fail closed).
func groupRuns(pgid int) bool {
	if syscall.Kill(-pgid, 0) == syscall.ESRCH {
		return false
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, p := range procs {
		if p.Name()[0] < '0' || p.Name()[0] > '9' {
			continue
		}
		stat, err := os.ReadFile("/proc/" + p.Name() + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		// The fields are pid (comm) state ppid pgrp. comm may hold ')'.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			return true
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 {
			return true
		}
		if g, _ := strconv.Atoi(f[2]); g == pgid && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// ViewOf returns the report form of h in state st.
func ViewOf(h Hold, st string) View {
	return View{ID: h.ID, Module: h.Module, Step: h.Step, State: st, PID: h.PID,
		Containers: h.Containers, OpenedAt: h.OpenedAt, Deadline: h.Deadline, Changed: slices.Sorted(maps.Keys(h.Changed)),
		Gathering: h.Gathering, Runner: h.Runner, execStep: h.StepGroup != 0}
}

// View returns the report form of c. A mesh hold's view also says why
// it is in its state.
func (c Classified) View() View {
	v := ViewOf(c.Hold, c.State)
	v.why, v.todo = c.why, c.todo
	return v
}

// Why says why a dead window's mesh hold is in its state, and ToDo what a
// person does about it. Both are "" for any other hold.
func (v View) Why() string  { return v.why }
func (v View) ToDo() string { return v.todo }

// HeldNames are the held containers' names, each held changed marked so:
// "store.registry (changed)".
func (v View) HeldNames() []string {
	var names []string
	for _, n := range v.Containers {
		if v.IsChanged(n) {
			n += " (changed)"
		}
		names = append(names, n)
	}
	return names
}

// IsChanged reports whether v holds container name changed.
func (v View) IsChanged(name string) bool { return slices.Contains(v.Changed, name) }

// Describe is the one-line text form, such as "window w-…
// store/garbage-collect open since 03:30:02, holds store.registry".
func (v View) Describe() string {
	held := strings.Join(v.HeldNames(), ", ")
	if held == "" {
		held = "nothing"
	}
	s := fmt.Sprintf("window %s %s/%s %s since %s, holds %s", v.ID, v.Module, v.Step, v.State,
		state.When(v.OpenedAt), held)
	switch {
	case v.why != "":
		s += " (its process is gone; " + v.why + ")"
	case v.State == Orphaned && v.Gathering != "" && v.Runner != "":
		s += " (its process is gone; its mesh window's step runs on host " + v.Runner + ")"
	case v.State == Unknown && v.Gathering != "":
		s += " (its process is gone; nothing here says its mesh window's step is over, so the hold stays)"
	case v.State == Orphaned && v.execStep:
		s += " (its process is gone; processes of its step still run)"
	case v.State == Orphaned:
		s += " (its process is gone; its step container still runs)"
	case v.State == Unknown:
		s += " (its process is gone; the engine cannot say whether its step container runs, so the hold stays)"
	}
	return s
}

// Classified is a hold with its state.
type Classified struct {
	Hold
	State string
	// why says why a dead window's mesh hold is in its state, and todo
	// what a person does about it.
	why, todo string
	// endDue marks a dead runner's mesh hold whose step is over here, but
	// not in etcd. It reads unknown until RecordEnds records the end.
	endDue bool
}

// Classify gives each hold of doc its state. It checks every window's lock
// first and only then calls steps, exactly once. A window that starts its
// step container and then dies has done both before its lock reads free.
// So a listing made after that check sees the container, where one made
// before could miss it. When steps fails, a dead window with a step
// container reads Unknown and stays honoured. stepsErr returns that error,
// so a caller that needs the listing can fail. Last, each dead window's
// mesh hold that the engine found stale asks l.Gathering (meshState).
func (l Liveness) Classify(doc *HoldsDoc, now time.Time, steps StepsFunc) (out []Classified, stepsErr error, err error) {
	alive := make([]bool, len(doc.Holds))
	for i, h := range doc.Holds {
		if alive[i], err = l.Dir.Held(WindowLock(h.ID)); err != nil {
			return nil, nil, fmt.Errorf("window %s: %w", h.ID, err)
		}
	}
	var running func(string) bool
	if steps != nil {
		running, stepsErr = steps()
	}
	for i, h := range doc.Holds {
		c := Classified{Hold: h, State: stateOf(h, alive[i], running, stepsErr, now)}
		switch {
		case h.Gathering == "":
		case c.State == Stale:
			// Its step does not run here. Whether it runs elsewhere, etcd says.
			l.meshState(&c)
		case c.State == Orphaned && stepHere(h):
			c.why = fmt.Sprintf("its mesh window %s's step still runs here, and every host of the mesh holds until it ends", h.Gathering)
			c.todo = "once it exits, the next apply or window run here records its end"
			if h.StepContainer != "" {
				c.todo += "; only a person stops it: docker stop " + h.StepContainer
			}
		}
		out = append(out, c)
	}
	return out, stepsErr, nil
}

// stepHere reports whether the step of h's mesh window runs on this host.
// A hold that records a step container or group is the runner's. The
// host name alone is no proof: two hosts may share one by mistake, and a
// member must never record an end for a step that runs elsewhere.
func stepHere(h Hold) bool {
	return h.StepContainer != "" || h.StepGroup != 0
}

// meshState classifies c, the hold of a dead mesh window whose step does
// not run here. It is stale only once etcd says its gathering is over. A
// lapsed lease is no proof that a step ended. Where etcd cannot say, the
// hold stays (fail closed). endDue marks a step that ran here and is over,
// while etcd has no end yet. The hold stays until RecordEnds records it.
func (l Liveness) meshState(c *Classified) {
	h := c.Hold
	c.State = Unknown
	if l.Gathering == nil {
		c.why = fmt.Sprintf("it is part of mesh window %s, and without an etcd ledger nothing can say whether its step runs", h.Gathering)
		c.todo = "give meshctl the etcd ledger its window had (--ledger etcd://… or MESHCTL_LEDGER), then apply again"
		return
	}
	g, ok, err := l.Gathering(h.Module, h.Gathering)
	runner := cmp.Or(g.Runner, h.Runner)
	switch {
	case err != nil:
		c.why = fmt.Sprintf("etcd cannot say whether its mesh window %s's step runs: %v", h.Gathering, err)
		c.todo = "the next apply or window run here asks again, once etcd answers"
	case !ok:
		// Archived gatherings past the last kept are gone. So is one in
		// another cluster or prefix. Neither proves that the step ended.
		c.why = fmt.Sprintf("etcd has no record of its mesh window %s (it keeps only a module's latest), so nothing can say whether its step ended", h.Gathering)
		c.todo = fmt.Sprintf("ask host %s whether its step ended: meshctl cannot tell, so the hold stays", runner)
	case g.Over():
		c.State = Stale
	case g.State == ledger.GatherStarted && stepHere(h):
		c.endDue = true
		c.why = fmt.Sprintf("its mesh window %s's step is over here, but its end is not in etcd yet", g.ID)
		c.todo = "the next apply or window run here records it (meshctl apply --last), and the other hosts then release theirs"
	case g.State == ledger.GatherStarted && runner == l.Host:
		c.why = fmt.Sprintf("its mesh window %s's runner is named %s, as this host, but its hold records no step here", g.ID, runner)
		c.todo = "check that every host of the mesh has its own --host-name"
	case g.State == ledger.GatherStarted:
		c.State = Orphaned
		c.why = fmt.Sprintf("its mesh window %s's step runs on host %s", g.ID, runner)
		c.todo = fmt.Sprintf("host %s's next apply or window run records the step's end once it has exited, or run meshctl apply --last on host %s", runner, runner)
	default:
		// A member died before the step started. Its lease lapses, but the
		// step may start until then. A wait or join of another host
		// fails the gathering once the lapse or the deadline is seen.
		c.why = fmt.Sprintf("its mesh window %s is %s, not started nor failed: its step may still start", g.ID, g.State)
		c.todo = fmt.Sprintf("once another host's wait or a window run of %s past the deadline fails it, the next apply here releases the hold", h.Module)
	}
}

// dropStale drops the stale holds from doc, appends each to hist, and
// returns them. Call it under the state lock, and write both files after.
func dropStale(doc *HoldsDoc, hist *History, classified []Classified, now time.Time) []Classified {
	var released []Classified
	for _, c := range classified {
		if c.State != Stale {
			continue
		}
		doc.Drop(c.ID)
		if hist.Has(c.ID) {
			// A window that closed but could not bring everything back left
			// its hold for the next apply. Its entry is written already.
			released = append(released, c)
			continue
		}
		hist.Append(Entry{ID: c.ID, Module: c.Module, Step: c.Step, OpenedAt: c.OpenedAt, ClosedAt: now,
			Result: Stale, Error: fmt.Sprintf("window process %d died without closing; hold released", c.PID)})
		released = append(released, c)
	}
	return released
}
