package coord

import (
	"context"

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
	// PreviewJoin says what JoinGathering(j) would do now, writing
	// nothing: the hosts that must join, and the join's refusal, if any.
	PreviewJoin(ctx context.Context, j ledger.Join) (ledger.JoinPreview, error)
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
// Leave. It is ledger.Gathered, which says what each method does. It is
// an alias so that *ledger.Ledger is a GatherStore.
type Gathered = ledger.Gathered
