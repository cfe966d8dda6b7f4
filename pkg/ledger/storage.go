package ledger

import (
	"context"
	"time"
)

// storage is where a ledger keeps its builds. It is the state directory's
// files (fileStore) or an etcd cluster (etcdStore). A store stores and finds.
// The rule is the Ledger's alone, written once over this interface. That is
// Decide, what a second record means, and when a plan is settled.
type storage interface {
	// update runs fn as one atomic change, all its writes or none. fn may run
	// more than once. etcd re-runs it on a lost compare, and after an answer
	// lost in flight. So fn changes nothing but through tx.
	update(ctx context.Context, fn func(tx txn) error) error
	// view runs fn over one consistent snapshot.
	view(ctx context.Context, fn func(v view) error) error
	// current reads module's current build alone, as apply needs it. It is a
	// lock-free snapshot of one file, or one linearizable read.
	current(ctx context.Context, module string) (*record, error)
	// modules lists the modules with a recorded build.
	modules(ctx context.Context) ([]string, error)
	// describe names the store for messages, by a directory or endpoints.
	describe() string
	// dump reads the whole ledger from one snapshot, for export. load writes
	// one into an empty ledger, for import. A ledger that is not empty is bad
	// input.
	dump(ctx context.Context) (*dump, error)
	load(ctx context.Context, d *dump) error
}

// view reads a ledger.
type view interface {
	// build finds build id. p is set for a pending build, f for a recorded
	// one. Neither means the ledger never issued it.
	build(id string) (p *pendingRec, f *found, err error)
	// currentOf is module's current build, nil for none.
	currentOf(module string) (*record, error)
	// plan returns plan id with every build it asked for.
	plan(id string) (planRec, bool, error)
	// modules lists the modules with a recorded or a pending build.
	modules() ([]string, error)
	// pending returns the pending builds of module.
	pending(module string) (map[string]pendingRec, error)
	// retained returns the builds of module kept in full.
	retained(module string) ([]record, error)
}

// txn is a view that can change the ledger.
type txn interface {
	view
	// issue returns n new id bodies, each larger than every id issued before.
	// now is the time they carry.
	issue(n int, now time.Time) ([]string, error)
	// addPending makes build id pending.
	addPending(id string, p pendingRec)
	// putPlan stores pr with every build it asked for.
	putPlan(pr planRec)
	// putRecord stores rec as a recorded build of module, no longer pending.
	// If its outcome is current, rec also becomes the module's current build.
	putRecord(module string, rec record) error
	// answer returns what the operation with idempotency key key answered, if
	// it committed. putAnswer stores that answer with the change.
	answer(key string) ([]byte, bool, error)
	putAnswer(key string, v []byte)
}
