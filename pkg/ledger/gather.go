package ledger

import (
	"fmt"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// A mesh window is one step run once for every host of a module. Its
// hosts meet in a gathering, under PREFIX/mesh/gatherings/MODULE/. There
// is at most one per module, mesh-wide.
//
// The first host to join creates it and runs the step. Its deadline is a
// lease of the step's gather, granted by that first join. So etcd counts
// it, never a host's clock. The hosts expected are the module's members
// (PREFIX/mesh/members/MODULE/) when the gathering is created.
//
// A gathering goes through these states, in this order:
//
//	gathering -> holding -> started -> ended
//
// A gathering fails (GatherFailed) before it starts, and never after.

// Gathering states.
const (
	// GatherOpen is a gathering some expected hosts have not joined.
	GatherOpen = "gathering"
	// GatherHolding is one every expected host joined, with the same
	// step hash. Each holds its containers, then says so (Held).
	GatherHolding = "holding"
	// GatherStarted is one whose step runs, on the runner's host.
	GatherStarted = "started"
	// GatherEnded is one whose step's end is recorded.
	GatherEnded = "ended"
	// GatherFailed is one that failed before its step started. Its step
	// never runs, and every host brings its containers back.
	GatherFailed = "failed"
)

// Join is one host's request to join a module's mesh window.
type Join struct {
	Module, Step, Host string
	// Hash is the hash of the host's step definition (coord.StepHashes).
	Hash string
	PID  int
	// Gather is how long hosts wait for each other. Only the first join's
	// counts: it sets the deadline.
	Gather time.Duration
	// Timeout is the step's timeout, for the record.
	Timeout time.Duration
	// Stopped says that the step holds containers stopped. Then a budget
	// below the number of hosts expected fails the gathering (exit 2).
	Stopped bool
	// MaxUnavailable is the host's budget for the module, 0 for none.
	MaxUnavailable int
}

// JoinPreview is what a join would do now. PreviewJoin reads it.
type JoinPreview struct {
	// Create says that the join would begin a new gathering, and that its
	// host would run the step. Else it would join Gathering.
	Create    bool
	Gathering Gathering
	// Hosts are those that must join: the module's members for a new
	// gathering, else the open one's expected hosts.
	Hosts []string
}

// GatherMember is one host of a gathering as etcd last said it.
type GatherMember struct {
	Host string `json:"host"`
	PID  int    `json:"pid,omitempty"`
	Hash string `json:"hash,omitempty"`
	// Joined says that the host joined. Alive says its session's lease
	// has not lapsed. A member alive is one that joined.
	Joined   bool      `json:"joined"`
	Alive    bool      `json:"alive"`
	JoinedAt time.Time `json:"joined_at,omitzero"`
	// Held says that the host holds its containers for the step.
	Held bool `json:"held"`
	// Closed says that the host closed its hold after the end. Back
	// says that its containers came back healthy.
	Closed bool `json:"closed"`
	Back   bool `json:"back,omitempty"`
}

// StepEnd is how a mesh window's step ended.
type StepEnd struct {
	// Result is one of window's results: ok, failed, timeout, interrupted.
	Result string    `json:"result"`
	Code   *int      `json:"code,omitempty"`
	At     time.Time `json:"at"`
	// By is the host that recorded it. That is the runner's host, by its
	// window or, after it died, by its next apply or window run.
	By string `json:"by"`
}

// OK says the step succeeded.
func (e StepEnd) OK() bool { return e.Result == "ok" }

// String says how the step ended: "ok (exit 0)", "interrupted".
func (e StepEnd) String() string {
	if e.Code != nil {
		return fmt.Sprintf("%s (exit %d)", e.Result, *e.Code)
	}
	return e.Result
}

// Gathering is a module's mesh window, as one read of etcd saw it.
type Gathering struct {
	Module string `json:"module"`
	Step   string `json:"step"`
	// ID names this gathering among the module's. Holds record it.
	ID     string `json:"id"`
	Hash   string `json:"hash"`
	Runner string `json:"runner"`
	State  string `json:"state"`
	// Expected are the hosts that must join, by name.
	Expected  []string  `json:"expected"`
	CreatedAt time.Time `json:"created_at"`
	// Deadline is when the gathering's lease lapses, on the reader's
	// clock. It is for people: the lease decides.
	Deadline time.Time      `json:"deadline"`
	Timeout  time.Duration  `json:"timeout"`
	Members  []GatherMember `json:"members"`
	// StartedAt is set once the step started.
	StartedAt time.Time `json:"started_at,omitzero"`
	End       *StepEnd  `json:"end,omitempty"`
	// Failure is why a failed gathering failed.
	Failure string `json:"failure,omitempty"`
	// Rev is the etcd revision of the read.
	Rev int64 `json:"-"`
}

// Missing are the expected hosts that have not joined, or whose session
// lapsed, sorted.
func (g *Gathering) Missing() []string {
	var out []string
	for _, m := range g.Members {
		if !m.Joined || !m.Alive {
			out = append(out, m.Host)
		}
	}
	return out
}

// Member returns host's member entry, if host is expected.
func (g *Gathering) Member(host string) (GatherMember, bool) {
	for _, m := range g.Members {
		if m.Host == host {
			return m, true
		}
	}
	return GatherMember{}, false
}

// Over says that the gathering's step is known not to run: it ended, or
// the gathering failed before it started.
func (g *Gathering) Over() bool { return g.State == GatherEnded || g.State == GatherFailed }

// GatherError is a join, wait or start that the gathering refused. Its
// kind gives the exit code: Busy (3) for a join too late or beside another
// mesh window, BadInput (2) for step hashes that differ or a budget too
// small, Failed (1) for hosts missing at the deadline or lapsed.
type GatherError struct {
	Kind   fault.Kind
	Module string
	Step   string
	ID     string
	// Why says what failed, naming the hosts.
	Why string
	// Hosts are the hosts it names: missing, lapsed or differing.
	Hosts []string
}

func (e *GatherError) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("mesh window %s/%s: %s", e.Module, e.Step, e.Why)
	}
	return fmt.Sprintf("mesh window %s/%s (gathering %s): %s", e.Module, e.Step, e.ID, e.Why)
}

// Fault gives the exit code's kind.
func (e *GatherError) Fault() fault.Kind { return e.Kind }
