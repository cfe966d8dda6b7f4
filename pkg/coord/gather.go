package coord

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/ledger"
)

// GatherStore is the etcd side of mesh windows (mesh: all). *ledger.Ledger
// is one. Every error that is not a *ledger.GatherError means etcd could
// not say: a caller fails closed on it.
type GatherStore interface {
	// JoinGathering joins module's mesh window as j.Host. It creates the
	// gathering when none is open, and the joiner is then its runner. A
	// join after the deadline, after the start, or beside an open mesh
	// window of another step is refused (GatherError, Busy). The member's
	// session lease lives until Leave.
	JoinGathering(ctx context.Context, j ledger.Join) (Gathered, error)
	// Gathering reads module's current gathering, if any.
	Gathering(ctx context.Context, module string) (ledger.Gathering, bool, error)
	// GatheringByID reads one of module's gatherings, also one replaced
	// since. A stale hold asks it whether its step may still run.
	GatheringByID(ctx context.Context, module, id string) (ledger.Gathering, bool, error)
	// RecordEnd records the end of a started gathering's step. The runner's
	// host calls it after its window died, once the step container exited.
	RecordEnd(ctx context.Context, module, id string, end ledger.StepEnd) error
	// Gatherings reads every module's current gathering, for the views.
	Gatherings(ctx context.Context) ([]ledger.Gathering, error)
}

// Gathered is one host's membership of a gathering, from its join to
// Leave. Each wait returns a *ledger.GatherError once the gathering failed.
type Gathered interface {
	// Gathering is the gathering as last read.
	Gathering() ledger.Gathering
	// Runner says whether this host runs the step.
	Runner() bool
	// AllJoined waits until every expected host joined with the same hash.
	// Then the gathering is holding. It fails the gathering at the deadline
	// (exit 1, naming the missing hosts), and on a hash that differs (exit 2).
	AllJoined(ctx context.Context) (ledger.Gathering, error)
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
	End(ctx context.Context, end ledger.StepEnd) error
	// WaitEnd, on another member, waits for the step's end until until.
	// Past it, it returns context.DeadlineExceeded and the caller keeps
	// its hold.
	WaitEnd(ctx context.Context, until time.Time) (ledger.StepEnd, error)
	// Closed says that this host closed its hold, and whether its
	// containers came back healthy.
	Closed(ctx context.Context, back bool) error
	// Leave ends the session's renewals. Its lease then lapses, or is
	// revoked when the host closed.
	Leave()
}
