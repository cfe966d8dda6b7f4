package ledger

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// fileStore keeps the ledger in the state directory's files. Every change is
// made under the one lock "ledger". Files are written in an order that leaves
// every prefix consistent. The package documentation says more, under
// Storage.
type fileStore struct{ l *Ledger }

func (s *fileStore) describe() string { return s.l.Dir.Path() + "/" + subdir }

func (s *fileStore) update(ctx context.Context, fn func(tx txn) error) error {
	lk, err := s.l.lock(ctx)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	tx, err := s.begin(lk)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return err
	}
	return tx.commit()
}

// view takes the lock too. A list or a plan reads several files, which must
// agree.
func (s *fileStore) view(ctx context.Context, fn func(v view) error) error {
	lk, err := s.l.lock(ctx)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	tx, err := s.begin(lk)
	if err != nil {
		return err
	}
	return fn(tx)
}

// current reads only the module's head, a lock-free snapshot.
func (s *fileStore) current(_ context.Context, module string) (*record, error) {
	mod, err := readModule(s.l.Dir, module)
	if err != nil {
		return nil, err
	}
	return mod.Current, nil
}

func (s *fileStore) modules(context.Context) ([]string, error) { return modules(s.l.Dir) }

func (s *fileStore) begin(lk *state.Lock) (*fileTx, error) {
	idx, err := readIndex(lk)
	if err != nil {
		return nil, err
	}
	return &fileTx{l: s.l, lk: lk, idx: idx, mods: map[string]*moduleDoc{}}, nil
}

// fileTx is one change or one read of the ledger's files, under the lock. A
// request changes the index and plans.json, written at commit in that order.
// A record writes its files itself, in the order that makes each prefix
// consistent.
type fileTx struct {
	l          *Ledger
	lk         *state.Lock
	idx        *indexDoc
	plans      *plansDoc // read on first need
	mods       map[string]*moduleDoc
	idxDirty   bool
	plansDirty bool
}

func (t *fileTx) module(m string) (*moduleDoc, error) {
	if mod, ok := t.mods[m]; ok {
		return mod, nil
	}
	mod, err := readModule(t.lk, m)
	if err != nil {
		return nil, err
	}
	t.mods[m] = mod
	return mod, nil
}

func (t *fileTx) readPlans() (*plansDoc, error) {
	if t.plans == nil {
		p, err := readPlans(t.lk)
		if err != nil {
			return nil, err
		}
		t.plans = p
	}
	return t.plans, nil
}

func (t *fileTx) build(id string) (*pendingRec, *found, error) {
	p, pending := t.idx.Pending[id]
	if !pending {
		// Recorded before, or never issued. This is the rare path, which may
		// read every module's history.
		if id[len(buildPrefix):] > t.idx.Last {
			return nil, nil, nil
		}
		f, ok, err := findRecorded(t.lk, id)
		if err != nil || !ok {
			return nil, nil, err
		}
		return nil, &f, nil
	}
	mod, err := t.module(p.Module)
	if err != nil {
		return nil, nil, err
	}
	if mod.LastRecorded == id {
		// Recorded, but the process died before it could update the index. A
		// change made now also drops it from there.
		f, ok, err := lookup(t.lk, mod, id)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			delete(t.idx.Pending, id)
			t.idxDirty = true
			return nil, &f, nil
		}
	}
	return &p, nil, nil
}

func (t *fileTx) currentOf(m string) (*record, error) {
	mod, err := t.module(m)
	if err != nil {
		return nil, err
	}
	return mod.Current, nil
}

func (t *fileTx) plan(id string) (planRec, bool, error) {
	plans, err := t.readPlans()
	if err != nil {
		return planRec{}, false, err
	}
	if i := slices.IndexFunc(plans.Plans, func(p planRec) bool { return p.ID == id }); i >= 0 {
		// Repair a plans.json that a kill kept from following the index.
		return withPending(plans.Plans[i], t.idx), true, nil
	}
	// An old plan, out of plans.json. Find it from its builds.
	return derivePlan(t.lk, t.idx, id)
}

func (t *fileTx) modules() ([]string, error) {
	ms, err := modules(t.lk.Dir())
	if err != nil {
		return nil, err
	}
	for _, p := range t.idx.Pending {
		if !slices.Contains(ms, p.Module) {
			ms = append(ms, p.Module)
		}
	}
	return ms, nil
}

func (t *fileTx) pending(m string) (map[string]pendingRec, error) {
	mod, err := t.module(m)
	if err != nil {
		return nil, err
	}
	out := map[string]pendingRec{}
	for id, p := range t.idx.Pending {
		if p.Module == m && id != mod.LastRecorded {
			out[id] = p
		}
	}
	return out, nil
}

func (t *fileTx) retained(m string) ([]record, error) {
	mod, err := t.module(m)
	if err != nil {
		return nil, err
	}
	return retained(t.lk, mod)
}

// issue issues ids from max(now, last issued)+1, as Ids in the package
// documentation says. The lock orders them.
func (t *fileTx) issue(n int, now time.Time) ([]string, error) {
	// Only a request issues, and it writes plans.json. So a plans.json that
	// cannot be read refuses the request before any id is issued.
	if _, err := t.readPlans(); err != nil {
		return nil, err
	}
	last, ok := parseSeq(t.idx.Last)
	if t.idx.Last != "" && !ok {
		return nil, &state.FileError{Path: indexFile, Err: fmt.Errorf("has a malformed last id %q", t.idx.Last)}
	}
	var out []string
	for range n {
		s, err := nextSeq(last, now, t.l.entropy())
		if err != nil {
			return nil, err
		}
		last = s
		out = append(out, s.String())
	}
	t.idx.Last = last.String()
	t.idxDirty = true
	return out, nil
}

func (t *fileTx) addPending(id string, p pendingRec) {
	t.idx.Pending[id] = p
	t.idxDirty = true
}

func (t *fileTx) putPlan(pr planRec) {
	plans := t.plans // read by issue or plan
	if plans == nil {
		plans = &plansDoc{}
		t.plans = plans
	}
	if i := slices.IndexFunc(plans.Plans, func(p planRec) bool { return p.ID == pr.ID }); i >= 0 {
		plans.Plans[i] = pr
	} else {
		plans.Plans = append(plans.Plans, pr)
	}
	t.plansDirty = true
}

// putRecord writes any new chunk, then the module's head, which records the
// build. Then it writes the index, which forgets the build as pending. Last
// comes the archive, when a chunk was flushed.
func (t *fileTx) putRecord(m string, rec record) error {
	mod, err := t.module(m)
	if err != nil {
		return err
	}
	if prev := mod.LastRecorded; prev != "" {
		// A crash between the two writes of the module's last record left
		// it pending in the index.
		delete(t.idx.Pending, prev)
	}
	if rec.Outcome == OutcomeCurrent {
		c := rec
		mod.Current = &c
	}
	mod.Recent = append(mod.Recent, rec)
	mod.LastRecorded = rec.ID
	flushed := len(mod.Recent) >= t.l.chunkSize()
	if flushed {
		if err := writeChunk(t.lk, mod); err != nil {
			return err
		}
	}
	if err := t.lk.Write(moduleFile(m), mod); err != nil {
		return err
	}
	delete(t.idx.Pending, rec.ID)
	if err := t.lk.Write(indexFile, t.idx); err != nil {
		return err
	}
	t.idxDirty = false
	if flushed {
		if err := t.l.archive(t.lk, mod); err != nil {
			return fmt.Errorf("build %s is recorded, but archiving the old builds of %s failed: %w", rec.ID, m, err)
		}
	}
	return nil
}

// The files change under the lock, so no answer is lost in flight.
func (t *fileTx) answer(string) ([]byte, bool, error) { return nil, false, nil }
func (t *fileTx) putAnswer(string, []byte)            {}

// commit writes the index first, since that makes the ids issued. Should
// plans.json not follow, the plan is found again from its builds.
func (t *fileTx) commit() error {
	if t.idxDirty {
		if err := t.lk.Write(indexFile, t.idx); err != nil {
			return err
		}
	}
	if t.plansDirty {
		plans := t.plans
		sort.Slice(plans.Plans, func(i, j int) bool { return plans.Plans[i].ID < plans.Plans[j].ID })
		plans.Plans = t.l.trimPlans(plans.Plans, t.idx)
		if err := t.lk.Write(plansFile, plans); err != nil {
			return err
		}
	}
	return nil
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
// and that it lacks. The index is written before plans.json. So a request
// killed between the two has issued builds that only the index knows. The
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

// derivePlan rebuilds the record of plan from the plan ids its builds carry.
// It serves a plan no longer in plans.json. Its builds were all issued after
// it.
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

// retained returns the builds of mod kept in full. Those are its current
// build, its recent ones and those of its chunks, each once.
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

// dump reads the whole ledger under the lock. It reads every module's kept
// records and archived compact ones, and the pending builds.
func (s *fileStore) dump(ctx context.Context) (*dump, error) {
	lk, err := s.l.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer lk.Unlock()
	tx, err := s.begin(lk)
	if err != nil {
		return nil, err
	}
	plans, err := tx.readPlans()
	if err != nil {
		return nil, err
	}
	known := map[string]time.Time{}
	for _, p := range plans.Plans {
		known[p.ID] = p.RequestedAt
	}
	ms, err := modules(lk.Dir())
	if err != nil {
		return nil, err
	}
	d := &dump{last: tx.idx.Last}
	have := map[string]bool{}
	for _, m := range ms {
		mod, err := tx.module(m)
		if err != nil {
			return nil, err
		}
		recs, err := retained(lk, mod)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			r := r
			have[r.ID] = true
			d.builds = append(d.builds, dumpBuild{id: r.ID, module: m, pending: pendingRec{Module: m, Plan: r.Plan, RequestedAt: r.RequestedAt}, record: &r})
		}
		cat, err := readCatalog(lk, m)
		if err != nil {
			return nil, err
		}
		for _, seg := range cat.Segments {
			a, err := readArchive(lk, m, seg.Seq)
			if err != nil {
				return nil, err
			}
			for _, c := range a.Builds {
				if have[c.ID] {
					continue
				}
				c := c
				have[c.ID] = true
				t, _ := ParseID(c.ID)
				d.builds = append(d.builds, dumpBuild{id: c.ID, module: m, pending: pendingRec{Module: m, Plan: c.Plan, RequestedAt: t}, pruned: &c})
			}
		}
	}
	for id, p := range tx.idx.Pending {
		if !have[id] {
			d.builds = append(d.builds, dumpBuild{id: id, module: p.Module, pending: p})
		}
	}
	sort.Slice(d.builds, func(i, j int) bool { return d.builds[i].id < d.builds[j].id })
	d.plans = plansOf(d.builds, known)
	return d, nil
}

// load writes d into an empty ledger, under the lock. It writes record by
// record in id order, so each module's current build is the one it was.
func (s *fileStore) load(ctx context.Context, d *dump) error {
	lk, err := s.l.lock(ctx)
	if err != nil {
		return err
	}
	defer lk.Unlock()
	tx, err := s.begin(lk)
	if err != nil {
		return err
	}
	ms, err := modules(lk.Dir())
	if err != nil {
		return err
	}
	if tx.idx.Last != "" || len(tx.idx.Pending) > 0 || len(ms) > 0 {
		return notEmpty(s.describe())
	}
	for _, b := range d.builds {
		if b.pruned != nil {
			return fmt.Errorf("build %s was pruned by the ledger it comes from (only its digest is kept), and a file ledger keeps no such build; import into etcd, or export before pruning", b.id)
		}
	}
	if _, err := tx.readPlans(); err != nil {
		return err
	}
	for _, b := range d.builds {
		if b.record == nil {
			tx.addPending(b.id, b.pending)
			continue
		}
		if err := tx.putRecord(b.module, *b.record); err != nil {
			return err
		}
	}
	tx.idx.Last = d.last
	tx.idxDirty = true
	tx.plans.Plans = d.plans
	tx.plansDirty = true
	return tx.commit()
}
