package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// pass is one pass of an apply (runLocked). It holds what each phase
// leaves for the next.
type pass struct {
	d     *state.Dir
	eng   engine.Client
	scope string
	opts  Options
	pulls *pulls

	// lock is the state lock. It is nil for a dry run, and once lost.
	lock *state.Lock
	// claim is this apply's, while it executes without the lock.
	claim *coord.HeldClaim
	// ahead holds a lock and list taken as the command started, for the
	// first pass (Options.Ahead). listed is the list asked for under the
	// lock, and stopList ends it.
	ahead    *Ahead
	listed   *listAhead
	stopList func()

	now      time.Time
	prev     record.Applied // the applied state before this apply
	file     *mesh.File
	desired  []lifecycle.Desired
	encoded  []string         // desired's specs encoded (Input.Encoded)
	early    *record.Desiring // the containers resolved before the lock
	windows  *coord.Windows
	in       Input
	items    []Item
	netItems []NetItem
	// netObserved are the networks this state directory created. It is
	// nil when the apply has no need to look (usesNetworks).
	netObserved []engine.Network
	absent      map[string]string // image: why the engine lacks it for good
	rep         *record.Report
	key         []byte          // the host's secret key, for a file with secrets
	recorded    *record.Applied // the applied state this apply records
	// appliedChanged says whether recorded differs from prev. If not,
	// applied.json is not written again.
	appliedChanged bool
}

// takeLock takes the state lock. It fails with a *coord.ClaimedError if
// another apply is carrying out its plan. Run waits for that apply, then
// plans from what it left. Past this, every claim left is dead, for heal.
// A lock taken ahead is used as it is, with its list.
func (a *pass) takeLock(ctx context.Context) error {
	lock, listed, stop := a.ahead.take()
	if lock == nil {
		var err error
		if lock, err = a.d.Lock(ctx, coord.StateLock, a.opts.Lock); err != nil {
			return err
		}
	}
	a.lock, a.listed, a.stopList = lock, listed, stop
	return coord.CheckClaims(a.d, lock.Read, nil)
}

// unlock releases the state lock this pass holds, if any, and ends a list
// asked for under it.
func (a *pass) unlock() {
	a.endList()
	if a.lock != nil {
		a.lock.Unlock()
	}
}

// endList cancels the list asked for ahead if no List took it, and waits
// for it to end.
func (a *pass) endList() {
	if a.stopList != nil {
		a.stopList()
		a.stopList = nil
	}
}

// read reads a state file under the lock. A dry run reads a snapshot
// instead. It changes nothing in the state directory, not even the lock
// file's holder line.
func (a *pass) read(name string, doc state.Document) (bool, error) {
	if a.lock == nil {
		return a.d.Read(name, doc)
	}
	return a.lock.Read(name, doc)
}

// observe reads what the plan is made from. That is the applied state,
// the desired containers resolved now, and the windows classified with
// the one engine listing. That listing is asked for first (startList),
// and the engine answers it meanwhile. It returns the `pull: always`
// images not pulled yet, to pull without the lock.
func (a *pass) observe(ctx context.Context) ([]string, error) {
	eng := a.eng
	if a.listed == nil && listsAhead(a.opts) {
		a.listed, a.stopList = startList(ctx, a.eng, a.scope)
	}
	if a.listed != nil {
		defer a.endList()
		eng = a.listed
	}
	if err := a.readPrev(); err != nil {
		return nil, err
	}
	a.file = a.opts.File
	if a.opts.Last {
		if a.prev.File == nil {
			return nil, nothingApplied(a.d.Path())
		}
		// apply --last --remove-module M applies every module but M.
		a.file = withoutModules(a.prev.File, a.opts.RemoveModules)
	}
	// Resolved here, under the lock. "Current" is what the ledger says now,
	// not what it said before a pull that took minutes.
	// The first apply of a file with secrets makes the secret key here. It
	// is past the engine's ping and under the lock. A dry run makes
	// nothing.
	keyOf := record.SecretKey
	if a.opts.DryRun {
		keyOf = record.PeekSecretKey
	}
	key, err := keyOf(a.d, a.file)
	if err != nil {
		return nil, err
	}
	a.key = key
	// The containers resolved before the lock are reused when the file,
	// the key and every artifact's build are the same (Desiring.Again).
	if a.desired, err = a.early.Again(a.file, a.opts.Resolve, key); err != nil {
		return nil, err
	}
	if newAlways := a.pulls.pinAlways(a.desired); len(newAlways) > 0 && !a.opts.DryRun {
		return newAlways, nil
	}
	// Encoded now, while the engine makes the list ObserveMesh waits for:
	// at 1000 containers, 3 ms less after its answer.
	a.encoded = EncodeSpecs(a.desired)
	a.now = a.opts.Now()
	if a.windows, err = coord.ObserveMesh(ctx, a.d, a.read, eng, a.scope, a.now, a.opts.Mesh); err != nil {
		return nil, err
	}
	if a.lock != nil {
		// A dead runner's mesh window whose step is over here: its end goes
		// to etcd before the plan, so the plan may release its hold.
		coord.RecordEnds(ctx, lifecycle.Executor{Engine: a.eng, Scope: a.scope}, a.windows, a.now, a.opts.Progress)
	}
	return nil, nil
}

// readPrev reads applied.json, the applied state before this apply. A file
// taken from the decode cache came from a snapshot of it. That snapshot
// must still be what applied.json holds, and it is used as read.
func (a *pass) readPrev() error {
	c := a.opts.Cached
	if c == nil {
		_, err := a.read(record.AppliedFile, &a.prev)
		return err
	}
	sum := a.d.Sum
	if a.lock != nil {
		sum = a.lock.Sum
	}
	have, _, err := sum(record.AppliedFile)
	if err != nil {
		return err
	}
	if have != c.Sum {
		return ErrStaleDecode
	}
	a.prev = *c.Applied
	return nil
}

// heal puts back what an apply that died carrying out its plan left
// (coord.HealClaims). A dry run heals nothing.
func (a *pass) heal(ctx context.Context) error {
	if a.lock == nil {
		return nil
	}
	x := lifecycle.Executor{Engine: a.eng, Scope: a.scope}
	return coord.HealClaims(ctx, a.lock, x, a.windows, nil, a.opts.Progress)
}

// plan decides one action per container (Plan). It decides from the
// desired containers, the engine's listing and the live windows' holds.
// Then it finds the images it needs. It returns those missing and not yet
// tried, to pull without the lock.
func (a *pass) plan(ctx context.Context) ([]string, error) {
	a.rep = &record.Report{DryRun: a.opts.DryRun, Containers: []record.ContainerReport{}, Windows: []coord.View{}}
	held := map[string]HoldRef{}
	for _, c := range a.windows.Classified {
		if c.State == coord.Stale {
			a.rep.Released = append(a.rep.Released, c.View())
			continue
		}
		a.rep.Windows = append(a.rep.Windows, c.View())
		for _, name := range c.Containers {
			_, changed := c.ChangedOf(name)
			held[name] = HoldRef{Window: c.ID, Changed: changed}
		}
	}
	a.in = Input{Desired: a.desired, Observed: a.windows.Observed, Holds: held, Prune: a.opts.Prune, Scope: a.scope,
		Modules: map[string]bool{}, Remove: map[string]bool{}, Now: a.now, Encoded: a.encoded}
	for m := range a.file.Modules {
		a.in.Modules[m] = true
	}
	if err := a.observeNetworks(ctx); err != nil {
		return nil, err
	}
	for _, m := range a.opts.RemoveModules {
		if err := checkRemovable(m, &a.prev, a.windows.Observed, a.netObserved); err != nil {
			return nil, err
		}
		a.in.Modules[m], a.in.Remove[m] = true, true
	}
	a.items = Plan(a.in)
	for _, it := range a.items {
		if a.in.Remove[it.Module] && it.Action == Held {
			return nil, heldModule(it.Module, it.Window)
		}
	}
	var err error
	if a.in.Taken, err = takenNames(ctx, a.eng, a.scope, a.items); err != nil {
		return nil, err
	}
	if len(a.in.Taken) > 0 {
		a.items = Plan(a.in)
	}
	if err := a.planNetworks(ctx); err != nil {
		return nil, err
	}
	missing, absent, err := missingImages(ctx, a.eng, a.items, a.pulls.tried)
	if err != nil {
		return nil, err
	}
	a.absent = absent
	if len(missing) > 0 && !a.opts.DryRun {
		return missing, nil
	}
	return nil, nil
}

// preview ends an apply that changes nothing, with its report. Such an
// apply is a dry run, or one refused because containers meshctl does not
// manage have names it wants.
func (a *pass) preview() (done bool, err error) {
	if conflicts := conflictNames(a.items); len(conflicts) > 0 {
		fillReport(a.rep, a.items, a.absent)
		a.rep.EngineCalls = a.eng.Calls()
		return true, &ConflictError{Names: conflicts, Owners: a.in.Taken}
	}
	if a.opts.DryRun {
		_ = a.slotNeeds() // it only says what slots the apply would take
		fillReport(a.rep, a.items, a.absent)
		a.fillNetworks()
		a.rep.Changed = Changes(a.items, a.netItems)
		a.rep.EngineCalls = a.eng.Calls()
		return true, nil
	}
	return false, nil
}

// release checks that this apply may replace the files it replaces. A
// newer meshctl's file, or one that does not parse, is reported and left
// alone. It skips applied.json, which observe read under this lock. Then it
// releases the holds of dead windows. The containers they held run again,
// as their window's close would have left them. The plan is made once
// more from what the engine has now.
func (a *pass) release(ctx context.Context) error {
	if err := record.CheckReport(a.lock); err != nil {
		return err
	}
	sources := record.ThisSource
	if a.opts.Last {
		sources = record.KeepSources
	}
	a.recorded = a.prev.Merge(a.file, a.opts.RemoveModules, a.desired, a.opts.Source, a.now.UTC(), sources)
	a.appliedChanged = a.recorded.KeepTimes(&a.prev)
	x := lifecycle.Executor{Engine: a.eng, Scope: a.scope}
	var policies map[string]string
	if a.windows.StaleCount() > 0 {
		policies = a.policies()
	}
	released, err := coord.ReleaseStale(ctx, a.lock, x, a.windows, policies, a.now, a.opts.Progress)
	if err != nil {
		return err
	}
	if released > 0 {
		a.in.Observed = a.windows.Observed
		a.items = Plan(a.in)
	}
	fillReport(a.rep, a.items, a.absent)
	markReleased(a.rep)
	a.fillNetworks()
	a.rep.Changed = Changes(a.items, a.netItems) || released > 0
	return nil
}

// markReleased gives the action released to each container a dead
// window's hold held and the plan then found unchanged. It runs again
// because this apply released that hold, not because nothing was done.
func markReleased(rep *record.Report) {
	by := map[string]coord.View{}
	for _, w := range rep.Released {
		for _, n := range w.Containers {
			by[n] = w
		}
	}
	for i := range rep.Containers {
		c := &rep.Containers[i]
		if w, ok := by[c.Name]; ok && c.Action == Unchanged {
			c.Action = Released
			c.Window = w.ID
			c.Reasons = []string{fmt.Sprintf("window %s (%s/%s) died without closing; its hold released, running again", w.ID, w.Module, w.Step)}
		}
	}
}

// policies are the restart policies of the containers a release brings
// back. Those may be of any module. The policies are what the applied
// state wants, with this apply's modules merged in.
func (a *pass) policies() map[string]string {
	// A module left out keeps the policy recorded at open. The key only
	// hashes, and a restart policy needs no hash, so no error counts.
	all, _, _ := a.recorded.DesiredFor(a.d, "")
	return lifecycle.RestartPolicies(a.scope, all, a.desired)
}

// execute carries out the plan with the state lock released. A claim
// covers the containers it changes (executeClaimed). So a health wait of
// minutes holds up no window. It returns the plan's error, and err when
// the lock could not be had again.
func (a *pass) execute(ctx context.Context) (runErr, err error) {
	if err := a.replaceNetworks(ctx); err != nil {
		return nil, err
	}
	if err := a.createNetworks(ctx); err != nil {
		// This came before any container, so nothing else changed.
		return nil, &FailedError{Err: err}
	}
	x := lifecycle.Executor{Engine: a.eng, Scope: a.scope, Settle: a.opts.Settle}
	runErr, a.lock, a.claim, err = executeClaimed(ctx, a.d, a.lock, x, a.items, a.absent, a.rep, a.opts)
	if err != nil {
		return runErr, err
	}
	return errors.Join(runErr, a.removeNetworks(ctx)), nil
}

// record writes the applied state and the report, and releases the claim.
func (a *pass) record(runErr error) error {
	a.rep.EngineCalls = a.eng.Calls()
	recorded := a.recorded
	if !a.appliedChanged {
		recorded = nil
	}
	// The deferrals first. A close that reads them before applied.json
	// finds applied.json changed under the lock, and converges again.
	err := coord.RecordDeferred(a.lock, deferrals(a.items))
	if err == nil {
		err = writeRecord(a.lock, recorded, a.rep, a.opts, runErr)
	}
	if err == nil && (a.opts.Cached == nil || a.appliedChanged) {
		// A cache that cannot be written costs the next apply a decode.
		_ = record.WriteDecoded(a.lock, a.opts.Decode, a.file, a.key, aheadable(a.opts))
	}
	if a.claim != nil {
		err = errors.Join(err, a.claim.Release(a.lock))
	}
	if err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// deferrals are the deferred changes of items, by the window whose close
// carries them out.
func deferrals(items []Item) map[string][]string {
	out := map[string][]string{}
	for _, it := range items {
		if it.Action == Deferred {
			out[it.Window] = append(out[it.Window], it.Name)
		}
	}
	return out
}

// takenNames asks the engine, for each container the plan would create,
// whether an unmanaged container already has its name. Only creates cost a
// request, so a no-op apply makes none.
func takenNames(ctx context.Context, eng engine.Client, scope string, items []Item) (map[string]string, error) {
	taken := map[string]string{}
	for _, it := range items {
		if it.Action != Create {
			continue
		}
		c, err := eng.Inspect(ctx, it.Name)
		if engine.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", it.Name, err)
		}
		if !lifecycle.IsService(c, scope) {
			taken[it.Name] = c.Labels[lifecycle.LabelManaged]
		}
	}
	return taken, nil
}

func conflictNames(items []Item) []string {
	var names []string
	for _, it := range items {
		if it.Action == Conflict {
			names = append(names, it.Name)
		}
	}
	return names
}

func fillReport(rep *record.Report, items []Item, absent map[string]string) {
	rep.Containers = slices.Grow(rep.Containers, len(items))
	for _, it := range items {
		cr := record.ContainerReport{Name: it.Name, Module: it.Module, Container: it.Container, Action: it.Action,
			Reasons: append([]string{}, it.Reasons...), Window: it.Window}
		if it.Desired != nil {
			cr.Build = it.Desired.Build
			if why, ok := absent[it.Desired.Image]; ok && needsImage(it) {
				cr.Reasons = append(cr.Reasons, it.Desired.Image+": "+why)
			}
		}
		rep.Containers = append(rep.Containers, cr)
	}
}

// checkRemovable refuses to remove a module this state directory knows
// nothing of. A typo must not read as done.
func checkRemovable(m string, prev *record.Applied, observed []engine.Container, nets []engine.Network) error {
	if prev.File != nil && prev.File.Modules[m] != nil {
		return nil
	}
	if _, ok := prev.Modules[m]; ok {
		return nil
	}
	for _, c := range observed {
		if c.Labels[lifecycle.LabelModule] == m {
			return nil
		}
	}
	// A network kept, in use, when its module was removed.
	for _, n := range nets {
		if n.Labels[lifecycle.LabelModule] == m {
			return nil
		}
	}
	return unknownModule(m, prev.ModuleNames())
}

// writeRecord writes the applied desired state a and the report. In a,
// the earlier modules are merged with this apply's. A nil a did not
// change, and applied.json stays as it is. The report's finished_at is
// the time of this apply's check.
func writeRecord(lock *state.Lock, a *record.Applied, rep *record.Report, opts Options, runErr error) error {
	now := opts.Now().UTC()
	if a != nil {
		if err := lock.Write(record.AppliedFile, a); err != nil {
			return err
		}
	}
	last := &record.LastReport{FinishedAt: now, Source: opts.Source, Result: record.ResultOK, Report: rep}
	if runErr != nil {
		last.Result, last.Error = record.ResultFailed, runErr.Error()
	}
	return lock.Write(record.ReportFile, last)
}
