package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/pkg/claims"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// Options is one apply.
type Options struct {
	File   *mesh.File
	Source string // the file's name, for the record
	DryRun bool
	Prune  bool
	// RemoveModules are modules removed whole: their containers removed,
	// their part of the applied state dropped.
	RemoveModules []string
	// Last re-applies the last applied state (apply --last): File is
	// ignored, and the applied state is read under the state lock.
	Last     bool
	Parallel int
	Resolve  Resolver
	Lock     state.LockOptions
	Now      func() time.Time
	// Progress reports what apply does, one line at a time (stderr).
	Progress func(format string, args ...any)
	// Warn reports what the operator should act on, even under -q;
	// default Progress.
	Warn func(format string, args ...any)
	// Status, when set (a terminal), shows each container's progress on a
	// line of its own, updated in place, instead of Progress's lines.
	Status func(container, msg string)
	// PullOutput receives the engine's pull progress (layers); nil: none.
	PullOutput io.Writer
	// Settle is how long a new container without a healthcheck must keep
	// running before it counts as started (WaitHealthy); 0 looks once.
	Settle time.Duration
}

// ConflictError is an apply refused before any change because an unmanaged
// container owns a name the file wants (exit 1).
type ConflictError struct {
	Names []string
	// Owners maps a name to the ID of the other state directory whose
	// container has it; a name not in it is a container meshctl does not
	// manage.
	Owners map[string]string
}

func (e *ConflictError) Error() string {
	var unmanaged, msgs []string
	for _, n := range e.Names {
		if owner := e.Owners[n]; owner != "" {
			msgs = append(msgs, ConflictReason(n, owner))
		} else {
			unmanaged = append(unmanaged, n)
		}
	}
	if len(unmanaged) > 0 {
		msgs = append([]string{fmt.Sprintf("%s already exist and meshctl does not manage them; rename or remove them, or rename the containers in the mesh file",
			strings.Join(unmanaged, ", "))}, msgs...)
	}
	return "nothing changed: " + strings.Join(msgs, "; ")
}

// NothingAppliedError is an apply --last where nothing was applied yet
// (exit 2).
type NothingAppliedError struct{ Dir string }

func (e *NothingAppliedError) Error() string {
	return "nothing was applied in " + e.Dir + " yet, so there is no last applied state: run meshctl apply -f FILE"
}

// Fault says it is bad input.
func (e *NothingAppliedError) Fault() fault.Kind { return fault.BadInput }

// UnknownModuleError is a --remove-module naming a module this state
// directory neither applied nor has containers of (exit 2).
type UnknownModuleError struct {
	Module  string
	Applied []string
}

func (e *UnknownModuleError) Error() string {
	msg := fmt.Sprintf("module %q was never applied here and has no containers", e.Module)
	if s := mesh.Suggest(e.Module, e.Applied); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	if len(e.Applied) > 0 {
		msg += " (applied modules: " + strings.Join(e.Applied, ", ") + ")"
	}
	return msg
}

// Fault says it is bad input.
func (e *UnknownModuleError) Fault() fault.Kind { return fault.BadInput }

// HeldModuleError is a --remove-module of a module whose containers a live
// window holds (exit 3): held containers are never touched, so the module
// cannot go until the window closes.
type HeldModuleError struct{ Module, Window string }

func (e *HeldModuleError) Error() string {
	return fmt.Sprintf("nothing changed: module %s is held by window %s; remove it once the window has closed", e.Module, e.Window)
}

// Fault says it is busy.
func (e *HeldModuleError) Fault() fault.Kind { return fault.Busy }

// Fault says a conflict is a failure.
func (e *ConflictError) Fault() fault.Kind { return fault.Failed }

// FailedError is an apply in which some containers could not be converged
// (exit 1). The report says which; Err joins their errors.
type FailedError struct{ Err error }

func (e *FailedError) Error() string { return e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// Fault says a failed apply is a failure.
func (e *FailedError) Fault() fault.Kind { return fault.Failed }

// Run converges the engine's containers to opts.File. It returns the report
// also when it fails, where one exists.
//
// Images are pulled without the state lock: the plan is made under the lock,
// and if it needs an image the engine lacks, the lock is released, the image
// pulled, and the plan made again. A slow pull never holds up a window's
// open or close, and a no-op apply costs two engine requests (ping, list),
// plus one per step that names its own run.image.
// Every artifact: is resolved where the plan is made, under the lock, and so
// again after every pull: a build recorded while this apply pulled wins.
func Run(ctx context.Context, d *state.Dir, eng engine.Client, opts Options) (*Report, error) {
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
	if opts.Last {
		// A snapshot, to resolve and pull early; runLocked reads it again
		// under the lock.
		a, ok, err := LoadApplied(d)
		if err != nil {
			return nil, err
		}
		if !ok || a.File == nil {
			return nil, &NothingAppliedError{Dir: d.Path()}
		}
		opts.File = withoutModules(a.File, opts.RemoveModules)
	}
	if opts.File == nil {
		opts.File = &mesh.File{Modules: map[string]*mesh.Module{}}
	}
	// Resolved once before anything is touched: a module without a current
	// build fails here, with nothing changed.
	desired, err := Desire(opts.File, opts.Resolve, nil)
	if err != nil {
		return nil, err
	}
	// The engine first: an apply that cannot reach it leaves the state
	// directory as it found it.
	if err := eng.Ping(ctx); err != nil {
		return nil, err
	}
	scope, err := scopeOf(d, opts.DryRun)
	if err != nil {
		return nil, err
	}
	p := &pulls{eng: eng, opts: opts, tried: map[string]error{}, ids: map[string]string{}}
	for i := range desired {
		if desired[i].Def.PullPolicy() == "always" {
			if err := p.pullAlways(ctx, desired[i].Image); err != nil {
				return nil, err
			}
		}
	}
	if !opts.DryRun {
		p.stepImages(ctx, opts.File)
	}
	for {
		rep, missing, err := runLocked(ctx, d, eng, scope, opts, p)
		if ce := (*claims.ClaimedError)(nil); errors.As(err, &ce) {
			opts.Progress("waiting: %v\n", ce)
			if err := claims.Wait(ctx, d, ce.Claim, opts.Lock.Timeout); err != nil {
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

// pulls is what one apply pulled, and what the tags it pulls named then.
type pulls struct {
	eng  engine.Client
	opts Options
	// tried holds each image this apply pulled, or failed to.
	tried map[string]error
	// ids holds, for pull: always images, the id their tag names now.
	ids    map[string]string
	always map[string]bool
}

// pull pulls ref once for this apply.
func (p *pulls) pull(ctx context.Context, ref string) {
	if _, done := p.tried[ref]; done {
		return
	}
	p.opts.Progress("pulling %s\n", ref)
	// A failure is not said here: the report says it once, on the line of
	// each container that needed the image.
	if err := p.eng.Pull(ctx, ref, p.opts.PullOutput); err != nil {
		p.tried[ref] = &reasonError{err: err, msg: engine.Reason(strings.TrimPrefix(err.Error(), "pull "+ref+": "))}
	} else {
		p.tried[ref] = nil
	}
}

// reasonError is an engine error as a report says it (engine.Reason).
type reasonError struct {
	err error
	msg string
}

func (e *reasonError) Error() string { return e.msg }
func (e *reasonError) Unwrap() error { return e.err }

// pullAlways pulls a pull: always image (a dry run changes no image: it
// compares with what the engine has) and notes the id its tag names now.
func (p *pulls) pullAlways(ctx context.Context, ref string) error {
	if _, done := p.ids[ref]; done {
		return nil
	}
	if !p.opts.DryRun {
		p.pull(ctx, ref)
	}
	id, err := p.eng.ImageID(ctx, ref)
	if err != nil && !engine.IsNotFound(err) {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if p.tried[ref] != nil && id != "" {
		// The registry is away, the image is here: run what we have.
		p.opts.Progress("pull %s failed (%v); using the local image\n", ref, p.tried[ref])
		p.tried[ref] = nil
	}
	p.ids[ref] = id
	return ctx.Err()
}

// pullMissing pulls an image the plan found missing.
func (p *pulls) pullMissing(ctx context.Context, ref string) error {
	if p.always[ref] {
		return p.pullAlways(ctx, ref)
	}
	p.pull(ctx, ref)
	return ctx.Err()
}

// stepImages gets ready, without the lock, the image of each step that
// names its own (run.image): a window refuses to open without its step's
// image, so an apply says early when it cannot be had. A step's default
// image is a container's, which the plan gets ready already.
func (p *pulls) stepImages(ctx context.Context, f *mesh.File) {
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		for _, sn := range slices.Sorted(maps.Keys(m.Steps)) {
			st := m.Steps[sn]
			if st.Run == nil || st.Run.Image == "" {
				continue
			}
			ref := st.Run.Image
			present, err := p.eng.ImagePresent(ctx, ref)
			if err == nil && !present {
				p.pull(ctx, ref)
				err = p.tried[ref]
			}
			if err != nil {
				p.opts.Warn("step %s/%s: image %s cannot be had (%v); the window will refuse to run until it can\n", mn, sn, ref, err)
			}
		}
	}
}

// runLocked makes the plan and carries it out under the state lock. It
// returns, without changing anything, the images the plan needs that are
// missing and not yet tried.
func runLocked(ctx context.Context, d *state.Dir, eng engine.Client, scope string, opts Options, p *pulls) (*Report, []string, error) {
	// A dry run reads snapshots and takes no lock: it changes nothing in
	// the state directory, not even the lock file's holder line.
	var lock *state.Lock
	var dead claims.Doc
	read := d.Read
	if !opts.DryRun {
		var err error
		if lock, err = d.Lock(ctx, holds.StateLock, opts.Lock); err != nil {
			return nil, nil, err
		}
		defer lock.Unlock()
		read = lock.Read
		// Another apply is carrying out its plan: wait for it (Run), then
		// plan from what it left. Past this, every claim left is dead: the
		// claims of applies that died carrying out their plans.
		if _, err := lock.Read(claims.File, &dead); err != nil {
			return nil, nil, err
		}
		live, err := claims.LiveOf(d, dead.Claims)
		if err != nil {
			return nil, nil, err
		}
		if len(live) > 0 {
			return nil, nil, &claims.ClaimedError{Claim: live[0]}
		}
	}

	hd, hist, err := holds.Read(read)
	if err != nil {
		return nil, nil, err
	}
	var prev Applied
	if _, err := read(AppliedFile, &prev); err != nil {
		return nil, nil, err
	}
	file := opts.File
	if opts.Last {
		if prev.File == nil {
			return nil, nil, &NothingAppliedError{Dir: d.Path()}
		}
		// apply --last --remove-module M: every applied module but M.
		file = withoutModules(prev.File, opts.RemoveModules)
	}
	// Resolved here, under the lock: "current" is what the ledger says now,
	// not what it said before a pull that took minutes.
	desired, err := Desire(file, opts.Resolve, nil)
	if err != nil {
		return nil, nil, err
	}
	var newAlways []string
	for i := range desired {
		dc := &desired[i]
		if dc.Def.PullPolicy() != "always" {
			continue
		}
		id, ok := p.ids[dc.Image]
		if !ok {
			// An artifact that moved while this apply pulled: pull it too.
			if p.always == nil {
				p.always = map[string]bool{}
			}
			p.always[dc.Image] = true
			newAlways = append(newAlways, dc.Image)
		}
		dc.PulledID = id
	}
	if len(newAlways) > 0 && !opts.DryRun {
		return nil, newAlways, nil
	}

	now := opts.Now()
	var observed []engine.Container
	classified, listErr, err := holds.Liveness{Dir: d}.Classify(&hd, now, Observe(ctx, eng, scope, &observed))
	if err != nil {
		return nil, nil, err
	}
	if listErr != nil {
		return nil, nil, fmt.Errorf("list containers: %w", listErr)
	}
	if !opts.DryRun {
		if observed, err = healInterrupted(ctx, lock, eng, scope, observed, dead.Claims, &hd, opts.Progress); err != nil {
			return nil, nil, err
		}
	}
	rep := &Report{DryRun: opts.DryRun, Containers: []ContainerReport{}, Windows: []holds.View{}}
	held := map[string]HoldRef{}
	for _, c := range classified {
		if c.State == holds.Stale {
			rep.Released = append(rep.Released, holds.ViewOf(c.Hold, c.State))
			continue
		}
		rep.Windows = append(rep.Windows, holds.ViewOf(c.Hold, c.State))
		for _, name := range c.Containers {
			held[name] = HoldRef{Window: c.ID}
		}
	}

	in := Input{Desired: desired, Observed: observed, Holds: held, Prune: opts.Prune, Scope: scope,
		Modules: map[string]bool{}, Remove: map[string]bool{}}
	for m := range file.Modules {
		in.Modules[m] = true
	}
	for _, m := range opts.RemoveModules {
		if err := checkRemovable(m, &prev, observed); err != nil {
			return nil, nil, err
		}
		in.Modules[m], in.Remove[m] = true, true
	}
	items := Plan(in)
	for _, it := range items {
		if in.Remove[it.Module] && it.Action == Held {
			return nil, nil, &HeldModuleError{Module: it.Module, Window: it.Window}
		}
	}
	if in.Taken, err = takenNames(ctx, eng, scope, items); err != nil {
		return nil, nil, err
	}
	if len(in.Taken) > 0 {
		items = Plan(in)
	}
	missing, absent, err := missingImages(ctx, eng, items, p.tried)
	if err != nil {
		return nil, nil, err
	}
	if len(missing) > 0 && !opts.DryRun {
		return nil, missing, nil
	}
	if conflicts := conflictNames(items); len(conflicts) > 0 {
		fillReport(rep, items, absent)
		rep.EngineCalls = eng.Calls()
		return rep, nil, &ConflictError{Names: conflicts, Owners: in.Taken}
	}
	if opts.DryRun {
		fillReport(rep, items, absent)
		rep.Changed = Changes(items)
		rep.EngineCalls = eng.Calls()
		return rep, nil, nil
	}
	// The files this apply replaces must be ones it may replace: a newer
	// meshctl's, or one that does not parse, is reported and left alone.
	// applied.json was read above, under this lock (prev): the report is
	// the one left to check.
	if err := CheckReport(lock); err != nil {
		return nil, nil, err
	}
	merged := prev.Merge(file, opts.RemoveModules, desired, opts.Source, now.UTC(), opts.Last)
	if len(rep.Released) > 0 {
		// A released container may be of any module: its policy is what
		// the applied state, this apply's modules merged in, wants.
		policies := map[string]string{}
		all, _ := merged.Desired()
		for i := range all {
			policies[all[i].Name] = all[i].EngineSpec(scope).Restart
		}
		for i := range desired {
			policies[desired[i].Name] = desired[i].EngineSpec(scope).Restart
		}
		x := Executor{Engine: eng, Scope: scope}
		back, err := x.ReleaseStale(ctx, lock, &hd, &hist, classified, observed, policies, now, opts.Progress)
		if err != nil {
			return nil, nil, err
		}
		// The released containers run again, as their window's close would
		// have left them: plan once more from what the engine has now.
		for i := range observed {
			if running, ok := back[observed[i].Name]; ok {
				observed[i].Running = running
			}
		}
		in.Observed = observed
		items = Plan(in)
	}
	fillReport(rep, items, absent)
	rep.Changed = Changes(items)

	// Carried out with the state lock released, under a claim on the
	// containers it changes: a health wait of minutes holds up no window.
	runErr, lock, claim, err := executeClaimed(ctx, d, lock, Executor{Engine: eng, Scope: scope, Settle: opts.Settle},
		items, absent, rep, opts)
	if err != nil {
		return rep, nil, errors.Join(runErr, err)
	}
	defer lock.Unlock()
	rep.EngineCalls = eng.Calls()
	err = record(lock, merged, rep, opts, runErr)
	if claim != nil {
		err = errors.Join(err, claim.Release(lock))
	}
	if err != nil {
		return rep, nil, errors.Join(runErr, err)
	}
	return rep, nil, runErr
}

// takenNames asks the engine, for each container the plan would create,
// whether an unmanaged container already has its name. Only creates cost a
// request: a no-op apply makes none.
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
		if !IsService(c, scope) {
			taken[it.Name] = c.Labels[LabelManaged]
		}
	}
	return taken, nil
}

// needsImage reports whether carrying out it needs its image: a create, a
// recreate, or a change deferred until a window's close, which then must
// not wait for a pull (or fail on "No such image").
func needsImage(it Item) bool {
	return it.Desired != nil && (it.Action == Create || it.Action == Recreate || it.Action == Deferred)
}

// missingImages returns the images that creates, recreates and deferred
// changes need and the engine lacks: to pull (not tried yet, pull policy allows), and absent
// (tried and failed, or pull: never) with why.
func missingImages(ctx context.Context, eng engine.Client, items []Item, tried map[string]error) ([]string, map[string]string, error) {
	absent := map[string]string{}
	var missing []string
	seen := map[string]bool{}
	for _, it := range items {
		if !needsImage(it) || seen[it.Desired.Image] {
			continue
		}
		ref, policy := it.Desired.Image, it.Desired.Def.PullPolicy()
		seen[ref] = true
		if err, ok := tried[ref]; ok {
			if err != nil {
				absent[ref] = "pull failed: " + err.Error()
			}
			continue
		}
		if policy == "always" {
			missing = append(missing, ref)
			continue
		}
		present, err := eng.ImagePresent(ctx, ref)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", ref, err)
		}
		switch {
		case present:
		case policy == "never":
			absent[ref] = "image missing and pull: never"
		default:
			missing = append(missing, ref)
		}
	}
	sort.Strings(missing)
	return missing, absent, nil
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

func fillReport(rep *Report, items []Item, absent map[string]string) {
	for _, it := range items {
		cr := ContainerReport{Name: it.Name, Module: it.Module, Container: it.Container, Action: it.Action,
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

// execute carries out the plan, independent containers in parallel. Each
// item's outcome is written into its report line; a failed one becomes
// "failed" with its error. A create or recreate whose image is absent fails
// without touching the engine: stopping the old container only to find the
// new one cannot be made would take the service down for nothing.
func execute(ctx context.Context, x Executor, items []Item, absent map[string]string, rep *Report, opts Options) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		sem  = make(chan struct{}, opts.Parallel)
	)
	x.Health = func(name, health string) {
		if opts.Status != nil {
			opts.Status(name, "health: "+health)
		}
		mu.Lock()
		defer mu.Unlock()
		for i := range rep.Containers {
			if rep.Containers[i].Name == name {
				rep.Containers[i].Health = health
			}
		}
	}
	ord := newOrder(items)
	for i := range items {
		it := &items[i]
		if it.Action != Create && it.Action != Recreate && it.Action != Remove {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// After its dependencies, and without a slot while it waits:
			// a slot held by a waiter could starve what it waits for.
			failedDep := ord.wait(ctx, it)
			sem <- struct{}{}
			defer func() { <-sem }()
			err := ctx.Err()
			defer func() { ord.finish(it.Name, err != nil) }()
			if failedDep != "" && err == nil {
				err = &DependencyError{Dep: failedDep, Action: it.Action}
			} else if why, ok := absent[imageOf(it)]; ok && err == nil && it.Action != Remove {
				err = fmt.Errorf("image %s: %s; %s", it.Desired.Image, why, untouched[it.Action])
			} else if err == nil {
				if opts.Status != nil {
					opts.Status(it.Name, progressVerb(it.Action)+"…")
				} else {
					opts.Progress("%s %s\n", progressVerb(it.Action), it.Name)
				}
				switch it.Action {
				case Create:
					err = x.Create(ctx, it.Desired)
				case Recreate:
					err = x.Recreate(ctx, it.Desired, *it.Observed)
				case Remove:
					err = x.Remove(ctx, *it.Observed)
				}
			}
			if opts.Status != nil {
				opts.Status(it.Name, doneWord(it.Action, err))
			}
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Errorf("%s: %w", it.Name, err))
				cr := &rep.Containers[i]
				if _, ok := absent[imageOf(it)]; ok && it.Action != Remove {
					// The reasons say why already (the image's line):
					// the error says only what became of the container.
					cr.Action, cr.Error = Failed, untouched[it.Action]
					return
				}
				if de := (*DependencyError)(nil); errors.As(err, &de) {
					cr.Action, cr.Error = Failed, err.Error()
					return
				}
				var he *HealthError
				if errors.As(err, &he) {
					// The reason says how it failed; the log, why.
					cr.Reasons = append(cr.Reasons, he.Reason)
					cr.Log = he.Log
				}
				cr.Reasons = append(cr.Reasons, it.Action+" failed")
				cr.Action, cr.Error = Failed, engine.Reason(err.Error())
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(errs) > 0 {
		return &FailedError{Err: errors.Join(errs...)}
	}
	return nil
}

// untouched says what became of a container whose image is absent.
var untouched = map[string]string{Create: "not created", Recreate: "the old container was left as it was"}

func imageOf(it *Item) string {
	if it.Desired == nil {
		return ""
	}
	return it.Desired.Image
}

// doneWord is a container's line once its action is done.
func doneWord(action string, err error) string {
	switch {
	case err != nil:
		return action + " failed"
	case action == Create:
		return "created"
	case action == Recreate:
		return "recreated"
	default:
		return "removed"
	}
}

func progressVerb(action string) string {
	switch action {
	case Create:
		return "creating"
	case Recreate:
		return "recreating"
	default:
		return "removing"
	}
}

// withoutModules returns f without the modules in drop (f itself when
// there are none).
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

// checkRemovable refuses to remove a module this state directory knows
// nothing of: a typo must not read as done.
func checkRemovable(m string, prev *Applied, observed []engine.Container) error {
	if prev.File != nil && prev.File.Modules[m] != nil {
		return nil
	}
	if _, ok := prev.Modules[m]; ok {
		return nil
	}
	for _, c := range observed {
		if c.Labels[LabelModule] == m {
			return nil
		}
	}
	return &UnknownModuleError{Module: m, Applied: prev.ModuleNames()}
}

// record writes the applied desired state, a's modules merged with this
// apply's, and the report.
func record(lock *state.Lock, a *Applied, rep *Report, opts Options, runErr error) error {
	now := opts.Now().UTC()
	if err := lock.Write(AppliedFile, a); err != nil {
		return err
	}
	last := &LastReport{FinishedAt: now, Source: opts.Source, Result: "ok", Report: rep}
	if runErr != nil {
		last.Result, last.Error = "failed", runErr.Error()
	}
	return lock.Write(ReportFile, last)
}

// scopeOf returns the state directory's ID. A dry run makes none: a state
// directory without one manages no container yet, so it gets a scope that
// matches none.
func scopeOf(d *state.Dir, dryRun bool) (string, error) {
	if !dryRun {
		return d.ID()
	}
	id, ok, err := d.PeekID()
	if err != nil || ok {
		return id, err
	}
	return "none-yet", nil
}
