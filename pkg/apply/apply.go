package apply

import (
	"context"
	"errors"
	"io"
	"maps"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// Options is one apply.
type Options struct {
	File   *mesh.File
	Source string // the file's name, for the record
	DryRun bool
	Prune  bool
	// RemoveModules are modules removed whole. Their containers are
	// removed, and their part of the applied state is dropped.
	RemoveModules []string
	// Last re-applies the last applied state (apply --last). File is then
	// ignored, and the applied state is read under the state lock.
	Last     bool
	Parallel int
	Resolve  record.Resolver
	Lock     state.LockOptions
	Now      func() time.Time
	// Progress reports what apply does, one line at a time (stderr).
	Progress func(format string, args ...any)
	// Warn reports what the operator should act on, even under -q. It
	// defaults to Progress.
	Warn func(format string, args ...any)
	// Status, if set, shows each container's progress on a line of its
	// own, updated in place. It replaces Progress's lines on a terminal.
	Status func(container, msg string)
	// PullOutput receives the engine's pull progress, layer by layer. Nil
	// shows none.
	PullOutput io.Writer
	// Settle is how long a new container without a healthcheck must keep
	// running before it counts as started (WaitHealthy). Zero looks once.
	Settle time.Duration
	// Decode is what File was decoded from. The apply then caches the
	// decode (record.WriteDecoded). Cached is set when File came from that
	// cache. Under the state lock, applied.json must still be the one it
	// came from. Else Run fails with ErrStaleDecode.
	Decode record.DecodeInput
	Cached *record.Cached
	// Budget takes the slots of modules with max-unavailable. Nil means no
	// etcd ledger, and a file that uses max-unavailable is refused.
	Budget *coord.Budget
	// Mesh is what a dead mesh window's hold is classified with. Its
	// Gather is asked only for such a hold. Its zero value, a file ledger,
	// keeps such a hold (unknown).
	Mesh coord.Mesh
	// Ahead is the state lock and list taken as the command started
	// (StartAhead). The first pass uses them. Run drops them for a file
	// whose first pass may not (aheadable), and once that pass is over.
	Ahead *Ahead
}

// Run converges the engine's containers to opts.File. It returns the report
// even when it fails, if one exists.
//
// Images are pulled without the state lock. The plan is made under the
// lock. If it needs an image the engine lacks, the lock is released, the
// image pulled, and the plan made again. So a slow pull never holds up a
// window's open or close. A no-op apply costs two engine requests, a ping
// and a list. Each step that names its own run.image adds one. Where
// networks matter (usesNetworks), one listing of them is added.
// Every `artifact: MODULE` is resolved where the plan is made, under the
// lock. So it is resolved again after every pull, and a build recorded
// while this apply pulled wins.
func Run(ctx context.Context, d *state.Dir, eng engine.Client, opts Options) (*record.Report, error) {
	opts = opts.withDefaults()
	if opts.Last {
		// A snapshot, to resolve and pull early. runLocked reads it again
		// under the lock.
		a, ok, err := record.LoadApplied(d)
		if err != nil {
			return nil, err
		}
		if !ok || a.File == nil {
			return nil, nothingApplied(d.Path())
		}
		opts.File = withoutModules(a.File, opts.RemoveModules)
	}
	if opts.File == nil {
		opts.File = &mesh.File{Modules: map[string]*mesh.Module{}}
	}
	defer opts.Ahead.Drop()
	if !aheadable(opts) {
		opts.Ahead.Drop()
	}
	if err := opts.Budget.CheckFile(opts.File); err != nil {
		return nil, err
	}
	dryRunMembers(opts)
	if err := publishFirst(ctx, opts); err != nil {
		return nil, err
	}
	rep, err := converge(ctx, d, eng, opts)
	return rep, errors.Join(err, settleBudget(ctx, opts, rep, err))
}

// converge is Run once its file is known. It resolves, pulls and takes
// slots without the lock, and passes under it until a pass is done.
func converge(ctx context.Context, d *state.Dir, eng engine.Client, opts Options) (*record.Report, error) {
	// Resolved once before anything is touched. A module without a current
	// build fails here, with nothing changed.
	// The secret key is only read here, since the engine must answer
	// before anything is made. The pass under the lock makes it.
	key, err := record.PeekSecretKey(d, opts.File)
	if err != nil {
		return nil, err
	}
	early, err := record.DesireOnce(opts.File, opts.Resolve, key)
	if err != nil {
		return nil, err
	}
	desired := early.Desired
	warnSecretModes(desired, opts.Warn)
	// The engine goes first. An apply that cannot reach it leaves the
	// state directory as it found it.
	if err := eng.Ping(ctx); err != nil {
		return nil, err
	}
	scopeOf := d.ID
	if opts.DryRun {
		scopeOf = func() (string, error) { return lifecycle.PeekScope(d) } // a dry run makes no ID
	}
	scope, err := scopeOf()
	if err != nil {
		return nil, err
	}
	p := &pulls{eng: eng, opts: opts, tried: map[string]error{}, ids: map[string]string{}}
	if err := p.early(ctx, desired, opts.File); err != nil {
		return nil, err
	}
	for {
		// The first pass may reuse the containers resolved here. A later
		// one follows a wait or a pull, and resolves them again.
		rep, missing, err := runLocked(ctx, d, eng, scope, opts, p, early)
		early = nil
		opts.Ahead.Drop() // the first pass's alone
		if ce := (*coord.ClaimedError)(nil); errors.As(err, &ce) {
			opts.Progress("waiting: %v\n", ce)
			if err := coord.WaitClaim(ctx, d, ce.Claim, opts.Lock.Timeout); err != nil {
				return nil, err
			}
			continue
		}
		if sn := (*slotsNeeded)(nil); errors.As(err, &sn) {
			if err := takeSlots(ctx, opts, sn); err != nil {
				return nil, err
			}
			continue
		}
		if len(missing) == 0 || opts.DryRun {
			return rep, err
		}
		for _, ref := range missing {
			if err := p.pullMissing(ctx, ref); err != nil {
				return nil, err
			}
		}
	}
}

// withDefaults returns opts with a default for each field left unset.
func (opts Options) withDefaults() Options {
	if opts.Parallel < 1 {
		opts.Parallel = 1
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = func(string, ...any) {}
	}
	if opts.Warn == nil {
		opts.Warn = opts.Progress
	}
	return opts
}

// withoutModules returns f without the modules in drop. With none to
// drop, it returns f itself.
func withoutModules(f *mesh.File, drop []string) *mesh.File {
	if len(drop) == 0 {
		return f
	}
	out := &mesh.File{Modules: maps.Clone(f.Modules)}
	for _, m := range drop {
		delete(out.Modules, m)
	}
	return out
}

// runLocked is one pass of an apply, read as its phases. It takes the
// state lock. A dry run takes none and reads snapshots instead. It
// observes what is and heals what an interrupted apply left. It plans and
// releases the holds of dead windows. It executes the plan under a claim,
// and records. If the plan needs images that are missing and not yet
// tried, it returns them without changing anything.
func runLocked(ctx context.Context, d *state.Dir, eng engine.Client, scope string, opts Options, p *pulls, early *record.Desiring) (*record.Report, []string, error) {
	a := &pass{d: d, eng: eng, scope: scope, opts: opts, pulls: p, early: early, ahead: opts.Ahead}
	if !opts.DryRun {
		defer a.unlock()
		if err := a.takeLock(ctx); err != nil {
			return nil, nil, err
		}
	}
	if missing, err := a.observe(ctx); err != nil || len(missing) > 0 {
		return nil, missing, err
	}
	if err := a.heal(ctx); err != nil {
		return nil, nil, err
	}
	if missing, err := a.plan(ctx); err != nil || len(missing) > 0 {
		return nil, missing, err
	}
	if done, err := a.preview(); done {
		return a.rep, nil, err
	}
	// A slot is taken without the lock, before the claim.
	if err := a.slotNeeds(); err != nil {
		return nil, nil, err
	}
	if err := a.release(ctx); err != nil {
		return nil, nil, err
	}
	if err := a.slotNeeds(); err != nil {
		return nil, nil, err
	}
	runErr, err := a.execute(ctx)
	if err != nil {
		return a.rep, nil, errors.Join(runErr, err)
	}
	return a.rep, nil, a.record(runErr)
}

// warnSecretModes warns of the secret files other users can read or
// change. It warns once per file.
func warnSecretModes(desired []lifecycle.Desired, warn func(string, ...any)) {
	seen := map[string]bool{}
	for _, d := range desired {
		for _, w := range d.Warnings {
			if !seen[w] {
				seen[w] = true
				warn("%s\n", w)
			}
		}
	}
}
