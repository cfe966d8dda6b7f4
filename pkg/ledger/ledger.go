package ledger

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/state"
)

// Outcome is what recording a build did.
type Outcome string

// The outcomes of a record.
const (
	// OutcomeCurrent means the build became its module's current artifact.
	OutcomeCurrent Outcome = "current"
	// OutcomeSuperseded means a build requested later is already current. The
	// record changed nothing else.
	OutcomeSuperseded Outcome = "superseded"
	// OutcomeFailed means the build failed. It is never current.
	OutcomeFailed Outcome = "failed"
)

// State is where a build stands now.
type State string

// The states of a build.
const (
	StatePending    State = "pending"
	StateCurrent    State = "current"
	StateSuperseded State = "superseded" // recorded with an image, not (or no longer) current
	StateFailed     State = "failed"
)

// Defaults of a Ledger's tunables.
const (
	DefaultRetain    = 200
	DefaultChunkSize = 20
)

// Build is one build as the ledger knows it.
type Build struct {
	ID          string
	Module      string
	Plan        string
	State       State
	Image       string // empty while pending, for a failed build, and once pruned
	Reason      string // why it failed, if told
	RequestedAt time.Time
	FinishedAt  time.Time // zero while pending and once pruned
	// Outcome is what its record printed. It is empty while pending.
	Outcome Outcome
	// Pruned is true when only its compact record is left.
	Pruned bool
}

// Plan is the builds one request asked for, plus any added with its id.
type Plan struct {
	ID          string
	RequestedAt time.Time
	// Settled is true once every build of the plan is recorded.
	Settled bool
	Builds  []Build
}

// Ledger is the build ledger in a state directory. The zero values of its
// tunables mean their defaults.
type Ledger struct {
	Dir *state.Dir
	// Now is the clock ids and times are taken from (default time.Now).
	Now func() time.Time
	// Retain is how many recorded builds of each module are kept in full
	// (default 200). Older ones leave a compact record. A negative Retain
	// keeps none.
	Retain int
	// ChunkSize is the size of a chunk file (default 20). The module's head
	// holds that many recorded builds before they move to a chunk.
	ChunkSize int
	// LockTimeout is how long to wait for the ledger lock. Zero tries once.
	LockTimeout time.Duration
	// Entropy feeds the random low bits of ids (default crypto/rand).
	Entropy io.Reader
	// Warnf reports what the ledger does on its own in the background. An
	// example is a window published again after its lease lapsed. By default
	// it reports nothing.
	Warnf func(format string, args ...any)

	st storage // nil: the files of Dir
}

// New returns the ledger of the state directory d, with default tunables.
func New(d *state.Dir) *Ledger { return &Ledger{Dir: d} }

func (l *Ledger) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

func (l *Ledger) warnf(format string, args ...any) {
	if l.Warnf != nil {
		l.Warnf(format, args...)
	}
}

func (l *Ledger) retain() int {
	switch {
	case l.Retain < 0:
		return 0
	case l.Retain == 0:
		return DefaultRetain
	}
	return l.Retain
}

func (l *Ledger) chunkSize() int {
	if l.ChunkSize <= 0 {
		return DefaultChunkSize
	}
	return l.ChunkSize
}

func (l *Ledger) entropy() io.Reader {
	if l.Entropy != nil {
		return l.Entropy
	}
	return defaultEntropy
}

func (l *Ledger) lock(ctx context.Context) (*state.Lock, error) {
	return l.Dir.Lock(ctx, lockName, state.LockOptions{Timeout: l.LockTimeout, What: lockWhat})
}

// Decide is the ledger's one rule. It says what recording build id does, with
// a success (ok) or a failure. current is the id of the module's current
// build, "" for none. Only a successful build requested at or after the
// current one replaces a module's current artifact. Ids order requests, and
// compare as text.
func Decide(current, id string, ok bool) Outcome {
	switch {
	case !ok:
		return OutcomeFailed
	case current == "" || id >= current:
		return OutcomeCurrent
	default:
		return OutcomeSuperseded
	}
}

// store is the ledger's storage. It is the one set by OpenEtcd, else the
// files of Dir.
func (l *Ledger) store() storage {
	if l.st != nil {
		return l.st
	}
	return &fileStore{l: l}
}

// Where names the ledger for messages, by its directory or etcd endpoints.
func (l *Ledger) Where() string { return l.store().describe() }

// Close releases the ledger's connection, if it has one.
func (l *Ledger) Close() error {
	if c, ok := l.st.(interface{ close() error }); ok {
		return c.close()
	}
	return nil
}

// newKey returns a fresh idempotency key. A store that loses an answer in
// flight runs the operation again, and the key finds its first answer.
func (l *Ledger) newKey() (string, error) {
	var b [12]byte
	if _, err := io.ReadFull(rand.Reader, b[:]); err != nil {
		return "", fmt.Errorf("read randomness for an idempotency key: %w", err)
	}
	// No time in it. etcd forgets answers by a lease the cluster counts,
	// never by a host's clock.
	return fmt.Sprintf("%x", b), nil
}

// once runs fn in one update under an idempotency key. An earlier run of this
// same call may have committed and lost its answer in flight. Then that
// answer is returned, and fn changes nothing.
func once[T any](ctx context.Context, l *Ledger, fn func(tx txn) (T, error)) (T, error) {
	var out T
	key, err := l.newKey()
	if err != nil {
		return out, err
	}
	err = l.store().update(ctx, func(tx txn) error {
		if b, ok, err := tx.answer(key); err != nil {
			return err
		} else if ok {
			return json.Unmarshal(b, &out)
		}
		v, err := fn(tx)
		if err != nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		tx.putAnswer(key, b)
		out = v
		return nil
	})
	return out, err
}

// Request issues one build id per module, in the order given, and a plan id
// for them all. It does so in one change of the ledger. An etcd ledger takes
// at most etcdIDsPerTxn ids a change. For more modules, Request makes as many
// changes as needed, each whole, each after the last. With plan set, the
// builds join that existing plan instead. An unknown plan is bad input. A
// plan that had settled is open again until they are recorded.
func (l *Ledger) Request(ctx context.Context, modules []string, plan string) (Plan, error) {
	if len(modules) == 0 {
		return Plan{}, fmt.Errorf("request names no module")
	}
	seen := map[string]bool{}
	for _, m := range modules {
		if err := CheckModule(m); err != nil {
			return Plan{}, err
		}
		if seen[m] {
			return Plan{}, fault.New(fault.BadInput, "module %q is named twice; request one build per module", m)
		}
		seen[m] = true
	}
	if plan != "" {
		if err := checkID(plan, planPrefix, "plan"); err != nil {
			return Plan{}, err
		}
	}
	per := idsPerChange(l.store())
	if per == 0 || len(modules) < per {
		return l.request(ctx, modules, plan)
	}
	// More ids than one change of the store may issue. The first change opens
	// the plan, and each next one adds its builds to it, as --plan does.
	var out Plan
	for rest := modules; len(rest) > 0; {
		n := per
		if plan == "" {
			n-- // the plan's own id
		}
		batch := rest[:min(n, len(rest))]
		p, err := l.request(ctx, batch, plan)
		if err != nil {
			if out.ID == "" {
				return Plan{}, err
			}
			return Plan{}, fmt.Errorf("plan %s got %d of its %d builds before this failed (they stay pending: record them --failed, or request the rest with --plan %s): %w",
				out.ID, len(out.Builds), len(modules), out.ID, err)
		}
		if out.ID == "" {
			out = p
		} else {
			out.Builds = append(out.Builds, p.Builds...)
		}
		plan, rest = p.ID, rest[len(batch):]
	}
	return out, nil
}

// idsPerChange is how many ids one change of st may issue, 0 for no bound.
func idsPerChange(st storage) int {
	if b, ok := st.(interface{ idsPerChange() int }); ok {
		return b.idsPerChange()
	}
	return 0
}

// request issues ids for modules in one change of the ledger.
func (l *Ledger) request(ctx context.Context, modules []string, plan string) (Plan, error) {
	return once(ctx, l, func(tx txn) (Plan, error) {
		now := l.now().UTC()
		n := len(modules)
		var pr planRec
		if plan != "" {
			p, ok, err := tx.plan(plan)
			if err != nil {
				return Plan{}, err
			}
			if !ok {
				return Plan{}, unknownID("plan", plan)
			}
			pr = p
		} else {
			n++
		}
		bodies, err := tx.issue(n, now)
		if err != nil {
			return Plan{}, err
		}
		if plan == "" {
			pr = planRec{ID: planPrefix + bodies[0], RequestedAt: now}
			bodies = bodies[1:]
		}
		out := Plan{ID: pr.ID, RequestedAt: pr.RequestedAt}
		for i, m := range modules {
			id := buildPrefix + bodies[i]
			p := pendingRec{Module: m, Plan: pr.ID, RequestedAt: now}
			tx.addPending(id, p)
			pr.Builds = append(pr.Builds, planBuild{ID: id, Module: m})
			out.Builds = append(out.Builds, pendingBuild(id, p))
		}
		tx.putPlan(pr)
		return out, nil
	})
}

func checkID(id, prefix, kind string) error {
	if !strings.HasPrefix(id, prefix) {
		return fault.New(fault.BadInput, "%q is not a %s id: %s ids start with %q", id, kind, kind, prefix)
	}
	if _, ok := parseSeq(id[len(prefix):]); !ok {
		return fault.New(fault.BadInput, "%q is not a %s id: want %q and %d base32 characters", id, kind, prefix, idLen)
	}
	return nil
}

// Recorded is the result of Record.
type Recorded struct {
	Build   Build
	Outcome Outcome
	// Current is the module's current build after the record, if any.
	Current *Build
	// Again is true when the same result had already been recorded. Then
	// nothing changed, and Outcome is the one first printed.
	Again bool
}

// Record records the finished build id. img is the image built, or nil for a
// failure with an optional reason. The same result recorded again changes
// nothing and returns the first outcome. Another result is a *ConflictError,
// and the ledger is left untouched.
func (l *Ledger) Record(ctx context.Context, id string, img *Image, reason string) (Recorded, error) {
	if err := checkID(id, buildPrefix, "build"); err != nil {
		return Recorded{}, err
	}
	key, newResult := resultFailed, resultFailed
	if img != nil {
		key, newResult = img.Normalized, "image "+img.Ref
	}
	return once(ctx, l, func(tx txn) (Recorded, error) {
		p, f, err := tx.build(id)
		if err != nil {
			return Recorded{}, err
		}
		if f != nil {
			cur, err := tx.currentOf(f.module)
			if err != nil {
				return Recorded{}, err
			}
			return again(*f, cur, id, key, newResult)
		}
		if p == nil {
			return Recorded{}, unknownID("build", id)
		}
		cur, err := tx.currentOf(p.Module)
		if err != nil {
			return Recorded{}, err
		}
		rec := record{ID: id, Plan: p.Plan, RequestedAt: p.RequestedAt, FinishedAt: l.now().UTC(), Reason: reason,
			Outcome: Decide(idOf(cur), id, img != nil)}
		if img != nil {
			rec.Image = img.Ref
		}
		if rec.Outcome == OutcomeCurrent {
			cur = &rec
		}
		if err := tx.putRecord(p.Module, rec); err != nil {
			return Recorded{}, err
		}
		return Recorded{Build: toBuild(p.Module, rec, cur), Outcome: rec.Outcome, Current: buildOf(p.Module, cur)}, nil
	})
}

// again answers a record of a build already recorded. The same result is
// idempotent, and another is a conflict.
func again(f found, cur *record, id, key, newResult string) (Recorded, error) {
	if !f.sameResult(key) {
		return Recorded{}, &ConflictError{ID: id, Module: f.module, Recorded: f.describe(), New: newResult}
	}
	return Recorded{Build: f.build(cur), Outcome: f.outcome(), Current: buildOf(f.module, cur), Again: true}, nil
}

func idOf(cur *record) string {
	if cur == nil {
		return ""
	}
	return cur.ID
}

func stateOf(failed bool, id string, cur *record) State {
	switch {
	case failed:
		return StateFailed
	case cur != nil && cur.ID == id:
		return StateCurrent
	default:
		return StateSuperseded
	}
}

func toBuild(m string, r record, cur *record) Build {
	return Build{ID: r.ID, Module: m, Plan: r.Plan, State: stateOf(r.failed(), r.ID, cur), Image: r.Image,
		Reason: r.Reason, RequestedAt: r.RequestedAt, FinishedAt: r.FinishedAt, Outcome: r.Outcome}
}

func prunedBuild(m string, c compact, cur *record) Build {
	b := Build{ID: c.ID, Module: m, Plan: c.Plan, State: stateOf(c.Outcome == "f", c.ID, cur), Outcome: c.outcome(), Pruned: true}
	b.RequestedAt, _ = ParseID(c.ID)
	return b
}

func pendingBuild(id string, p pendingRec) Build {
	return Build{ID: id, Module: p.Module, Plan: p.Plan, State: StatePending, RequestedAt: p.RequestedAt}
}

func buildOf(m string, cur *record) *Build {
	if cur == nil {
		return nil
	}
	b := toBuild(m, *cur, cur)
	return &b
}

// CurrentBuild returns module's current build, and false if it has none. It
// is one lock-free read of the module's file, or one linearizable read of
// etcd. apply resolves `artifact: MODULE` with it.
func (l *Ledger) CurrentBuild(ctx context.Context, module string) (Build, bool, error) {
	if err := CheckModule(module); err != nil {
		return Build{}, false, err
	}
	cur, err := l.store().current(ctx, module)
	if err != nil || cur == nil {
		return Build{}, false, err
	}
	return *buildOf(module, cur), true, nil
}

// RecheckTimeout bounds CurrentBuildAgain to one attempt of an etcd call.
const RecheckTimeout = attempt

// CurrentBuildAgain is CurrentBuild for a re-read under a lock. Apply
// resolves the module before it takes its state lock, then calls this under
// the lock. It is bounded to RecheckTimeout, not the ledger's Timeout. So an
// etcd that stopped answering meanwhile holds up the lock for seconds, not
// --lock-timeout. Every window of the host that waits for the lock waits that
// long too.
func (l *Ledger) CurrentBuildAgain(ctx context.Context, module string) (Build, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, RecheckTimeout)
	defer cancel()
	return l.CurrentBuild(ctx, module)
}

// Modules returns the modules the ledger knows. Those are the modules with a
// build, recorded or pending.
func (l *Ledger) Modules(ctx context.Context) ([]string, error) {
	var ms []string
	err := l.store().view(ctx, func(v view) error {
		var err error
		ms, err = v.modules()
		return err
	})
	return ms, err
}

// Currents returns the current build of every module that has one, by module
// name.
func (l *Ledger) Currents(ctx context.Context) ([]Build, error) {
	ms, err := l.store().modules(ctx)
	if err != nil {
		return nil, err
	}
	var out []Build
	for _, m := range ms {
		b, ok, err := l.CurrentBuild(ctx, m)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, b)
		}
	}
	return out, nil
}

// Current returns module's current build, or a *NoCurrentError.
func (l *Ledger) Current(module string) (Build, error) {
	b, ok, err := l.CurrentBuild(context.Background(), module)
	if err != nil {
		return Build{}, err
	}
	if !ok {
		return Build{}, &NoCurrentError{Module: module}
	}
	return b, nil
}

// List returns the builds of module that the ledger keeps in full, and the
// pending ones, in request order. An empty module means every module. Pruned
// builds are left out.
func (l *Ledger) List(ctx context.Context, module string) ([]Build, error) {
	if module != "" {
		if err := CheckModule(module); err != nil {
			return nil, err
		}
	}
	var out []Build
	err := l.store().view(ctx, func(v view) error {
		ms := []string{module}
		if module == "" {
			var err error
			if ms, err = v.modules(); err != nil {
				return err
			}
		}
		for _, m := range ms {
			cur, err := v.currentOf(m)
			if err != nil {
				return err
			}
			recs, err := v.retained(m)
			if err != nil {
				return err
			}
			for _, r := range recs {
				out = append(out, toBuild(m, r, cur))
			}
			pend, err := v.pending(m)
			if err != nil {
				return err
			}
			for id, p := range pend {
				out = append(out, pendingBuild(id, p))
			}
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, err
}

// Plan returns the plan id with the state of each of its builds.
func (l *Ledger) Plan(ctx context.Context, id string) (Plan, error) {
	if err := checkID(id, planPrefix, "plan"); err != nil {
		return Plan{}, err
	}
	var out Plan
	err := l.store().view(ctx, func(v view) error {
		pr, ok, err := v.plan(id)
		if err != nil {
			return err
		}
		if !ok {
			return unknownID("plan", id)
		}
		// Settled is computed from the builds, never stored. A plan with no
		// build has nothing recorded, and one with a build pending is open.
		out = Plan{ID: pr.ID, RequestedAt: pr.RequestedAt, Settled: len(pr.Builds) > 0}
		for _, pb := range pr.Builds {
			p, f, err := v.build(pb.ID)
			if err != nil {
				return err
			}
			switch {
			case p != nil:
				out.Settled = false
				out.Builds = append(out.Builds, pendingBuild(pb.ID, *p))
			case f != nil:
				cur, err := v.currentOf(pb.Module)
				if err != nil {
					return err
				}
				out.Builds = append(out.Builds, f.build(cur))
			default:
				return fault.New(fault.Failed, "build %s of plan %s is neither pending nor recorded in module %s; the ledger is damaged", pb.ID, id, pb.Module)
			}
		}
		return nil
	})
	return out, err
}
