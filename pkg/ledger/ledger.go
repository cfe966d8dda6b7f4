package ledger

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// Outcome is what recording a build did.
type Outcome string

// The outcomes of a record.
const (
	// OutcomeCurrent: the build became its module's current artifact.
	OutcomeCurrent Outcome = "current"
	// OutcomeSuperseded: a build requested later is already current; the
	// record changed nothing else.
	OutcomeSuperseded Outcome = "superseded"
	// OutcomeFailed: the build failed; it is never current.
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
	// Outcome is what its record printed; empty while pending.
	Outcome Outcome
	// Pruned is true when only its compact record is left.
	Pruned bool
}

// Plan is the builds one request asked for (plus any added with its id).
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
	// Retain is how many recorded builds of each module are kept in full;
	// older ones leave a compact record (default 200; negative keeps none).
	Retain int
	// ChunkSize is how many recorded builds the module's head holds before
	// they move to a chunk file, and the size of a chunk (default 20).
	ChunkSize int
	// LockTimeout is how long to wait for the ledger lock (0: try once).
	LockTimeout time.Duration
	// Entropy feeds the random low bits of ids (default crypto/rand).
	Entropy io.Reader
}

// New returns the ledger of the state directory d, with default tunables.
func New(d *state.Dir) *Ledger { return &Ledger{Dir: d} }

func (l *Ledger) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
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

// lockIndex takes the ledger lock and reads the index under it; the caller
// unlocks.
func (l *Ledger) lockIndex(ctx context.Context) (*state.Lock, *indexDoc, error) {
	lk, err := l.lock(ctx)
	if err != nil {
		return nil, nil, err
	}
	idx, err := readIndex(lk)
	if err != nil {
		lk.Unlock()
		return nil, nil, err
	}
	return lk, idx, nil
}

// readPlans reads the plans file under the lock.
func readPlans(lk *state.Lock) (*plansDoc, error) {
	plans := &plansDoc{}
	_, err := lk.Read(plansFile, plans)
	return plans, err
}

func readIndex(r reader) (*indexDoc, error) {
	idx := &indexDoc{}
	if _, err := r.Read(indexFile, idx); err != nil {
		return nil, err
	}
	if idx.Pending == nil {
		idx.Pending = map[string]pendingRec{}
	}
	return idx, nil
}

// Decide is the ledger's one rule: given the id of the module's current
// build ("" for none), what recording build id with a success (ok) or a
// failure does. A module's current artifact is replaced only by a successful
// build requested at or after the one it came from; ids order requests, and
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

// Request issues one build id per module, in the order given, and a plan id
// for them all, under the ledger lock. With plan set, the builds join that
// existing plan instead (an unknown plan is an *UnknownError); a plan that
// had settled is open again until they are recorded.
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
			return Plan{}, &ModuleError{Name: m, Why: "is named twice; request one build per module"}
		}
		seen[m] = true
	}
	if plan != "" {
		if err := checkID(plan, planPrefix, "plan"); err != nil {
			return Plan{}, err
		}
	}

	lk, idx, err := l.lockIndex(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer lk.Unlock()
	plans, err := readPlans(lk)
	if err != nil {
		return Plan{}, err
	}
	last, ok := parseSeq(idx.Last)
	if idx.Last != "" && !ok {
		return Plan{}, &state.FileError{Path: indexFile, Err: fmt.Errorf("has a malformed last id %q", idx.Last)}
	}
	now := l.now().UTC()
	issue := func() (string, error) {
		s, err := nextSeq(last, now, l.entropy())
		if err != nil {
			return "", err
		}
		last = s
		return s.String(), nil
	}

	var pr *planRec
	if plan != "" {
		i := slices.IndexFunc(plans.Plans, func(p planRec) bool { return p.ID == plan })
		if i >= 0 {
			// Repair a plans.json that a kill kept from following the index.
			plans.Plans[i] = withPending(plans.Plans[i], idx)
			pr = &plans.Plans[i]
		} else {
			// An old plan, out of plans.json: find it from its builds.
			rec, ok, err := derivePlan(lk, idx, plan)
			if err != nil {
				return Plan{}, err
			}
			if !ok {
				return Plan{}, &UnknownError{Kind: "plan", ID: plan}
			}
			plans.Plans = append(plans.Plans, rec)
			pr = &plans.Plans[len(plans.Plans)-1]
		}
	} else {
		body, err := issue()
		if err != nil {
			return Plan{}, err
		}
		plans.Plans = append(plans.Plans, planRec{ID: planPrefix + body, RequestedAt: now})
		pr = &plans.Plans[len(plans.Plans)-1]
	}
	out := Plan{ID: pr.ID, RequestedAt: pr.RequestedAt}
	for _, m := range modules {
		body, err := issue()
		if err != nil {
			return Plan{}, err
		}
		id := buildPrefix + body
		idx.Pending[id] = pendingRec{Module: m, Plan: pr.ID, RequestedAt: now}
		pr.Builds = append(pr.Builds, planBuild{ID: id, Module: m})
		out.Builds = append(out.Builds, Build{ID: id, Module: m, Plan: pr.ID, State: StatePending, RequestedAt: now})
	}
	idx.Last = last.String()
	// The index first: it is what makes the ids issued. Should the plans
	// file not follow, the plan is found again from its builds.
	if err := lk.Write(indexFile, idx); err != nil {
		return Plan{}, err
	}
	sort.Slice(plans.Plans, func(i, j int) bool { return plans.Plans[i].ID < plans.Plans[j].ID })
	plans.Plans = l.trimPlans(plans.Plans, idx)
	if err := lk.Write(plansFile, plans); err != nil {
		return Plan{}, err
	}
	return out, nil
}

// trimPlans keeps every plan with a pending build and the newest Retain
// settled ones.
func (l *Ledger) trimPlans(plans []planRec, idx *indexDoc) []planRec {
	open := map[string]bool{}
	for _, p := range idx.Pending {
		open[p.Plan] = true
	}
	keep := l.retain()
	var out []planRec
	for i := len(plans) - 1; i >= 0; i-- {
		switch {
		case open[plans[i].ID]:
		case keep > 0:
			keep--
		default:
			continue
		}
		out = append(out, plans[i])
	}
	slices.Reverse(out)
	return out
}

// withPending adds to pr the pending builds of the index that name its plan
// and that it lacks. The index is written before plans.json, so a request
// killed between the two has issued builds that only the index knows; the
// plan must count them, or it would read settled while they are pending.
func withPending(pr planRec, idx *indexDoc) planRec {
	var extra []planBuild
	for id, p := range idx.Pending {
		if p.Plan == pr.ID && !slices.ContainsFunc(pr.Builds, func(b planBuild) bool { return b.ID == id }) {
			extra = append(extra, planBuild{ID: id, Module: p.Module})
		}
	}
	if len(extra) == 0 {
		return pr
	}
	sort.Slice(extra, func(i, j int) bool { return extra[i].ID < extra[j].ID })
	pr.Builds = append(slices.Clone(pr.Builds), extra...)
	return pr
}

// derivePlan rebuilds the record of plan from the plan ids its builds carry:
// for a plan no longer in plans.json. Its builds were all issued after it.
func derivePlan(lk *state.Lock, idx *indexDoc, plan string) (planRec, bool, error) {
	rec := planRec{ID: plan}
	if t, err := ParseID(plan); err == nil {
		rec.RequestedAt = t
	}
	for id, p := range idx.Pending {
		if p.Plan == plan {
			rec.Builds = append(rec.Builds, planBuild{ID: id, Module: p.Module})
		}
	}
	ms, err := modules(lk.Dir())
	if err != nil {
		return planRec{}, false, err
	}
	inPlan := func(id, p, m string) {
		if p == plan && !slices.ContainsFunc(rec.Builds, func(b planBuild) bool { return b.ID == id }) {
			rec.Builds = append(rec.Builds, planBuild{ID: id, Module: m})
		}
	}
	floor := buildPrefix + strings.TrimPrefix(plan, planPrefix)
	for _, m := range ms {
		mod, err := readModule(lk, m)
		if err != nil {
			return planRec{}, false, err
		}
		recs, err := retained(lk, mod)
		if err != nil {
			return planRec{}, false, err
		}
		for _, r := range recs {
			inPlan(r.ID, r.Plan, m)
		}
		cat, err := readCatalog(lk, m)
		if err != nil {
			return planRec{}, false, err
		}
		for _, seg := range cat.Segments {
			if seg.Last < floor {
				continue
			}
			a, err := readArchive(lk, m, seg.Seq)
			if err != nil {
				return planRec{}, false, err
			}
			for _, c := range a.Builds {
				inPlan(c.ID, c.Plan, m)
			}
		}
	}
	sort.Slice(rec.Builds, func(i, j int) bool { return rec.Builds[i].ID < rec.Builds[j].ID })
	return rec, len(rec.Builds) > 0, nil
}

// retained returns the builds of mod kept in full: its current build, its
// recent ones and those of its chunks, each once.
func retained(r reader, mod *moduleDoc) ([]record, error) {
	var out []record
	seen := map[string]bool{}
	add := func(rs ...record) {
		for _, rec := range rs {
			if !seen[rec.ID] {
				seen[rec.ID] = true
				out = append(out, rec)
			}
		}
	}
	if mod.Current != nil {
		add(*mod.Current)
	}
	add(mod.Recent...)
	cat, err := readCatalog(r, mod.Module)
	if err != nil {
		return nil, err
	}
	for n := cat.FirstChunk; n < mod.NextChunk; n++ {
		c, err := readChunk(r, mod.Module, n)
		if err != nil {
			return nil, err
		}
		add(c.Builds...)
	}
	return out, nil
}

func checkID(id, prefix, kind string) error {
	if !strings.HasPrefix(id, prefix) {
		return &UnknownError{Kind: kind, ID: id, Why: fmt.Sprintf("%q is not a %s id: %s ids start with %q", id, kind, kind, prefix)}
	}
	if _, ok := parseSeq(id[len(prefix):]); !ok {
		return &UnknownError{Kind: kind, ID: id, Why: fmt.Sprintf("%q is not a %s id: want %q and %d base32 characters", id, kind, prefix, idLen)}
	}
	return nil
}

// Recorded is the result of Record.
type Recorded struct {
	Build   Build
	Outcome Outcome
	// Current is the module's current build after the record, if any.
	Current *Build
	// Again is true when the same result had already been recorded: nothing
	// changed, and Outcome is the one first printed.
	Again bool
}

// Record records the finished build id: built image img, or failed (img
// nil) with an optional reason. The same result recorded again changes
// nothing and returns the first outcome; another result is a
// *ConflictError, and the ledger is left untouched.
func (l *Ledger) Record(ctx context.Context, id string, img *Image, reason string) (Recorded, error) {
	if err := checkID(id, buildPrefix, "build"); err != nil {
		return Recorded{}, err
	}
	key, newResult := resultFailed, resultFailed
	if img != nil {
		key, newResult = img.Normalized, "image "+img.Ref
	}

	lk, idx, err := l.lockIndex(ctx)
	if err != nil {
		return Recorded{}, err
	}
	defer lk.Unlock()

	p, pending := idx.Pending[id]
	if !pending {
		// Recorded before, or never issued: the rare path, which may read
		// every module's history.
		if id[len(buildPrefix):] > idx.Last {
			return Recorded{}, &UnknownError{Kind: "build", ID: id}
		}
		f, ok, err := findRecorded(lk, id)
		if err != nil {
			return Recorded{}, err
		}
		if !ok {
			return Recorded{}, &UnknownError{Kind: "build", ID: id}
		}
		mod, err := readModule(lk, f.module)
		if err != nil {
			return Recorded{}, err
		}
		return again(f, mod, id, key, newResult)
	}

	mod, err := readModule(lk, p.Module)
	if err != nil {
		return Recorded{}, err
	}
	if mod.LastRecorded == id {
		// Recorded, but the process died before it could update the index.
		f, ok, err := lookup(lk, mod, id)
		if err != nil {
			return Recorded{}, err
		}
		if ok {
			res, err := again(f, mod, id, key, newResult)
			if err != nil {
				return Recorded{}, err
			}
			delete(idx.Pending, id)
			return res, lk.Write(indexFile, idx)
		}
	}
	if prev := mod.LastRecorded; prev != "" {
		// The same crash, for the build recorded before this one.
		delete(idx.Pending, prev)
	}

	now := l.now().UTC()
	var currentID string
	if mod.Current != nil {
		currentID = mod.Current.ID
	}
	rec := record{ID: id, Plan: p.Plan, RequestedAt: p.RequestedAt, FinishedAt: now, Reason: reason,
		Outcome: Decide(currentID, id, img != nil)}
	if img != nil {
		rec.Image = img.Ref
	}
	if rec.Outcome == OutcomeCurrent {
		c := rec
		mod.Current = &c
	}
	mod.Recent = append(mod.Recent, rec)
	mod.LastRecorded = id
	flushed := len(mod.Recent) >= l.chunkSize()
	if flushed {
		if err := writeChunk(lk, mod); err != nil {
			return Recorded{}, err
		}
	}
	// The module's file first: once it is written the build is recorded.
	// The index after it only forgets the build as pending.
	if err := lk.Write(moduleFile(mod.Module), mod); err != nil {
		return Recorded{}, err
	}
	delete(idx.Pending, id)
	if err := lk.Write(indexFile, idx); err != nil {
		return Recorded{}, err
	}
	if flushed {
		if err := l.archive(lk, mod); err != nil {
			return Recorded{}, fmt.Errorf("build %s is recorded, but archiving the old builds of %s failed: %w", id, mod.Module, err)
		}
	}
	return Recorded{Build: toBuild(mod.Module, rec, mod), Outcome: rec.Outcome, Current: currentOf(mod)}, nil
}

// again answers a record of a build already recorded: the same result is
// idempotent, another is a conflict.
func again(f found, mod *moduleDoc, id, key, newResult string) (Recorded, error) {
	if !f.sameResult(key) {
		return Recorded{}, &ConflictError{ID: id, Module: f.module, Recorded: f.describe(), New: newResult}
	}
	var b Build
	if f.full != nil {
		b = toBuild(f.module, *f.full, mod)
	} else {
		b = prunedBuild(f.module, *f.pruned, mod)
	}
	return Recorded{Build: b, Outcome: f.outcome(), Current: currentOf(mod), Again: true}, nil
}

// findRecorded looks for the recorded build id in every module's history.
func findRecorded(lk *state.Lock, id string) (found, bool, error) {
	ms, err := modules(lk.Dir())
	if err != nil {
		return found{}, false, err
	}
	for _, m := range ms {
		mod, err := readModule(lk, m)
		if err != nil {
			return found{}, false, err
		}
		if f, ok, err := lookup(lk, mod, id); err != nil || ok {
			return f, ok, err
		}
	}
	return found{}, false, nil
}

func stateOf(failed bool, id string, mod *moduleDoc) State {
	switch {
	case failed:
		return StateFailed
	case mod.Current != nil && mod.Current.ID == id:
		return StateCurrent
	default:
		return StateSuperseded
	}
}

func toBuild(m string, r record, mod *moduleDoc) Build {
	return Build{ID: r.ID, Module: m, Plan: r.Plan, State: stateOf(r.failed(), r.ID, mod), Image: r.Image,
		Reason: r.Reason, RequestedAt: r.RequestedAt, FinishedAt: r.FinishedAt, Outcome: r.Outcome}
}

func prunedBuild(m string, c compact, mod *moduleDoc) Build {
	b := Build{ID: c.ID, Module: m, Plan: c.Plan, State: stateOf(c.Outcome == "f", c.ID, mod), Outcome: c.outcome(), Pruned: true}
	b.RequestedAt, _ = ParseID(c.ID)
	return b
}

func pendingBuild(id string, p pendingRec) Build {
	return Build{ID: id, Module: p.Module, Plan: p.Plan, State: StatePending, RequestedAt: p.RequestedAt}
}

func currentOf(mod *moduleDoc) *Build {
	if mod.Current == nil {
		return nil
	}
	b := toBuild(mod.Module, *mod.Current, mod)
	return &b
}

// Current returns module's current build from a lock-free snapshot of its
// ledger file, and false if it has none. It is what apply resolves
// `artifact: MODULE` with.
func Current(d *state.Dir, module string) (Build, bool, error) {
	if err := CheckModule(module); err != nil {
		return Build{}, false, err
	}
	mod, err := readModule(d, module)
	if err != nil {
		return Build{}, false, err
	}
	b := currentOf(mod)
	if b == nil {
		return Build{}, false, nil
	}
	return *b, true, nil
}

// Currents returns the current build of every module that has one, by
// module name, from lock-free snapshots of their ledger files: for status.
func Currents(d *state.Dir) ([]Build, error) {
	ms, err := modules(d)
	if err != nil {
		return nil, err
	}
	var out []Build
	for _, m := range ms {
		b, ok, err := Current(d, m)
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
	b, ok, err := Current(l.Dir, module)
	if err != nil {
		return Build{}, err
	}
	if !ok {
		return Build{}, &NoCurrentError{Module: module}
	}
	return b, nil
}

// List returns the builds of module (of every module if it is empty) that
// the ledger keeps in full, and the pending ones, in request order. Pruned
// builds are left out.
func (l *Ledger) List(ctx context.Context, module string) ([]Build, error) {
	if module != "" {
		if err := CheckModule(module); err != nil {
			return nil, err
		}
	}
	// Under the lock: a list reads several files, which must agree.
	lk, idx, err := l.lockIndex(ctx)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	ms := []string{module}
	if module == "" {
		if ms, err = modules(l.Dir); err != nil {
			return nil, err
		}
		for _, p := range idx.Pending {
			if !slices.Contains(ms, p.Module) {
				ms = append(ms, p.Module)
			}
		}
	}
	var out []Build
	for _, m := range ms {
		mod, err := readModule(lk, m)
		if err != nil {
			return nil, err
		}
		recs, err := retained(lk, mod)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out = append(out, toBuild(m, r, mod))
		}
		for id, p := range idx.Pending {
			if p.Module == m && id != mod.LastRecorded {
				out = append(out, pendingBuild(id, p))
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Plan returns the plan id with the state of each of its builds.
func (l *Ledger) Plan(ctx context.Context, id string) (Plan, error) {
	if err := checkID(id, planPrefix, "plan"); err != nil {
		return Plan{}, err
	}
	lk, idx, err := l.lockIndex(ctx)
	if err != nil {
		return Plan{}, err
	}
	defer lk.Unlock()
	plans, err := readPlans(lk)
	if err != nil {
		return Plan{}, err
	}
	var pr planRec
	if i := slices.IndexFunc(plans.Plans, func(p planRec) bool { return p.ID == id }); i >= 0 {
		pr = withPending(plans.Plans[i], idx)
	} else {
		var ok bool
		if pr, ok, err = derivePlan(lk, idx, id); err != nil {
			return Plan{}, err
		}
		if !ok {
			return Plan{}, &UnknownError{Kind: "plan", ID: id}
		}
	}
	// Settled is computed from the builds, never stored: a plan with no
	// build has nothing recorded, and one with a build pending is open.
	out := Plan{ID: pr.ID, RequestedAt: pr.RequestedAt, Settled: len(pr.Builds) > 0}
	mods := map[string]*moduleDoc{}
	for _, pb := range pr.Builds {
		mod, ok := mods[pb.Module]
		if !ok {
			if mod, err = readModule(lk, pb.Module); err != nil {
				return Plan{}, err
			}
			mods[pb.Module] = mod
		}
		if p, ok := idx.Pending[pb.ID]; ok && pb.ID != mod.LastRecorded {
			out.Settled = false
			out.Builds = append(out.Builds, pendingBuild(pb.ID, p))
			continue
		}
		f, ok, err := lookup(lk, mod, pb.ID)
		if err != nil {
			return Plan{}, err
		}
		if !ok {
			return Plan{}, fmt.Errorf("build %s of plan %s is neither pending nor recorded in module %s; the ledger is damaged", pb.ID, id, pb.Module)
		}
		if f.full != nil {
			out.Builds = append(out.Builds, toBuild(pb.Module, *f.full, mod))
		} else {
			out.Builds = append(out.Builds, prunedBuild(pb.Module, *f.pruned, mod))
		}
	}
	return out, nil
}
