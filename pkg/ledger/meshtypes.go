package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// What the mesh's records are: windows, members, slots and gatherings'
// memberships. They are in every build; the etcd client that keeps them
// (windows.go, budget.go, gathering.go) only in one without the tag noetcd.

// MeshWindow is a maintenance window as the mesh sees it. Its host publishes
// it to the etcd that holds the ledger, under a lease that lapses when the
// window's process dies. Holds stay in local files. This view is for
// operators, and a window works the same with etcd down.
type MeshWindow struct {
	Host     string    `json:"host"`
	Module   string    `json:"module"`
	Step     string    `json:"step"`
	PID      int       `json:"pid"`
	OpenedAt time.Time `json:"opened_at"`
	// Lapsed is set when the window's lease lapsed but the window never
	// closed. Either its process was killed, or it is cut off from etcd. A
	// killed window's step may still run, and its host still holds the
	// module. The view cannot be sure the window is open, nor that it is not.
	// Check on the host.
	Lapsed bool `json:"lapsed,omitempty"`
}

// WindowTTL is the lease of a published window. The lease lapses this long
// after the window's process stops renewing it, killed or cut off from etcd.
const WindowTTL = 10 * time.Second

// ErrNotEtcd is returned by the mesh views of a ledger kept in files.
var ErrNotEtcd = errors.New("the mesh view needs an etcd ledger (--ledger etcd://HOST:PORT…)")

// Member says that a host runs a module that uses the mesh: one with a
// budget or a mesh: all step. Each host's apply writes it under
// PREFIX/mesh/members/MODULE/HOST when it changes.
type Member struct {
	Host   string `json:"host"`
	Module string `json:"module"`
	// MaxUnavailable is the module's budget in this host's mesh file. It
	// is 0 for none: the module is a member for its mesh: all steps.
	MaxUnavailable int `json:"max_unavailable"`
	// Steps are the hashes of the module's step definitions, by step.
	Steps     map[string]string `json:"steps,omitempty"`
	UpdatedAt time.Time         `json:"updated_at"`
}

// Slot is one host's share of a module's budget of hosts down. It lives
// under PREFIX/mesh/slots/MODULE/HOST, with no lease. A holder that dies
// leaves it, since its host may still be down.
type Slot struct {
	Host   string `json:"host"`
	Module string `json:"module"`
	// Token names the process that holds it. A give-back compares it.
	Token   string    `json:"token"`
	PID     int       `json:"pid"`
	TakenAt time.Time `json:"taken_at"`
	// Deadline is when the holder should be done: status --check reports a
	// slot held past it.
	Deadline   time.Time `json:"deadline"`
	Containers []string  `json:"containers,omitempty"`
}

// Budget is the outcome of one try at a slot.
type Budget struct {
	// Taken is set when the slot is the caller's now.
	Taken bool
	// Limit is the budget that held: the smallest one published.
	Limit int
	// Holders are the slots held by other hosts, when it was not taken.
	Holders []Slot
	// Rev is the revision the try read at. A wait watches from after it.
	Rev int64
}

// MeshState is the members and slots of the mesh, read at one revision.
type MeshState struct {
	Members []Member
	Slots   []Slot
}

// HolderNames names the holders of slots, as "host (pid N, since T)".
func HolderNames(slots []Slot) string {
	var out []string
	for _, s := range slots {
		out = append(out, fmt.Sprintf("%s (pid %d, since %s)", s.Host, s.PID, state.When(s.TakenAt)))
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// Gathered is one host's membership of a gathering, from its join to
// Leave. Each wait returns a *GatherError once the gathering failed.
// coord.Gathered is this interface.
type Gathered interface {
	// Gathering is the gathering as last read.
	Gathering() Gathering
	// Runner says whether this host runs the step.
	Runner() bool
	// AllJoined waits until every expected host joined with the same hash.
	// Then the gathering is holding. It fails the gathering at the deadline
	// (exit 1, naming the missing hosts), and on a hash that differs (exit 2).
	AllJoined(ctx context.Context) (Gathering, error)
	// Held says that this host holds its containers for the step.
	Held(ctx context.Context) error
	// Start, on the runner, waits until every member held and starts the
	// step. It fails the gathering if a member's session lapsed first.
	Start(ctx context.Context) error
	// WaitStart, on another member, waits until the runner started.
	WaitStart(ctx context.Context) error
	// Fail fails the gathering before its start, saying why. Every member
	// then brings its containers back.
	Fail(ctx context.Context, why string) error
	// End, on the runner, records how the step ended.
	End(ctx context.Context, end StepEnd) error
	// WaitEnd, on another member, waits for the step's end until until.
	// Past it, it returns context.DeadlineExceeded and the caller keeps
	// its hold.
	WaitEnd(ctx context.Context, until time.Time) (StepEnd, error)
	// Closed says that this host closed its hold, and whether its
	// containers came back healthy.
	Closed(ctx context.Context, back bool) error
	// Leave ends the session's renewals. Its lease then lapses, or is
	// revoked when the host closed.
	Leave()
}

// HostsNamed names hosts in a message: "host a", or "hosts a, b".
func HostsNamed(hosts []string) string {
	if len(hosts) == 1 {
		return "host " + hosts[0]
	}
	return "hosts " + strings.Join(hosts, ", ")
}
