package apply

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// Options is one apply.
type Options struct {
	File     *mesh.File
	Source   string // the file's name, for the record
	DryRun   bool
	Prune    bool
	Parallel int
	Resolve  Resolver
	Lock     state.LockOptions
	Now      func() time.Time
	// Progress reports what apply does, one line at a time (stderr).
	Progress func(format string, args ...any)
}

// ConflictError is an apply refused before any change because an unmanaged
// container owns a name the file wants (exit 1).
type ConflictError struct{ Names []string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("nothing changed: %s already exist and meshctl does not manage them; rename or remove them, or rename the containers in the mesh file",
		strings.Join(e.Names, ", "))
}

// ExitCode maps a conflict to exit status 1.
func (e *ConflictError) ExitCode() int { return 1 }

// FailedError is an apply in which some containers could not be converged
// (exit 1). The report says which; Err joins their errors.
type FailedError struct{ Err error }

func (e *FailedError) Error() string { return e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// ExitCode maps a failed apply to exit status 1.
func (e *FailedError) ExitCode() int { return 1 }

// Run converges the engine's containers to opts.File. It returns the report
// also when it fails, where one exists.
//
// Images are pulled without the state lock: the plan is made under the lock,
// and if it needs an image the engine lacks, the lock is released, the image
// pulled, and the plan made again. A slow pull never holds up a window's
// open or close, and a no-op apply costs two engine requests (ping, list).
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
	tried := map[string]error{} // images pulled (or failed to) by this apply
	if err := pullAlways(ctx, eng, desired, opts, tried); err != nil {
		return nil, err
	}
	for {
		rep, missing, err := runLocked(ctx, d, eng, scope, desired, opts, tried)
		if len(missing) == 0 || opts.DryRun {
			return rep, err
		}
		for _, ref := range missing {
			opts.Progress("pulling %s\n", ref)
			tried[ref] = eng.Pull(ctx, ref, nil)
			if tried[ref] != nil {
				opts.Progress("pull %s failed: %v\n", ref, tried[ref])
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
}

// pullAlways pulls, without the lock, the images of pull: always containers
// (a dry run changes no image: it compares with what the engine has), and
// notes on each the id its tag names now.
func pullAlways(ctx context.Context, eng engine.Client, desired []Desired, opts Options, tried map[string]error) error {
	ids := map[string]string{}
	for i := range desired {
		d := &desired[i]
		if d.Def.PullPolicy() != "always" {
			continue
		}
		ref := d.Image
		if _, done := ids[ref]; !done {
			if _, pulled := tried[ref]; !pulled && !opts.DryRun {
				opts.Progress("pulling %s\n", ref)
				tried[ref] = eng.Pull(ctx, ref, nil)
				if tried[ref] != nil {
					opts.Progress("pull %s failed: %v\n", ref, tried[ref])
				}
			}
			id, err := eng.ImageID(ctx, ref)
			if err != nil && !engine.IsNotFound(err) {
				return fmt.Errorf("image %s: %w", ref, err)
			}
			if tried[ref] != nil && id != "" {
				// The registry is away, the image is here: run what we have.
				opts.Progress("using the local %s\n", ref)
				tried[ref] = nil
			}
			ids[ref] = id
		}
		d.PulledID = ids[ref]
	}
	return ctx.Err()
}

// runLocked makes the plan and carries it out under the state lock. It
// returns, without changing anything, the images the plan needs that are
// missing and not yet tried.
func runLocked(ctx context.Context, d *state.Dir, eng engine.Client, scope string, desired []Desired, opts Options, tried map[string]error) (*Report, []string, error) {
	// A dry run reads snapshots and takes no lock: it changes nothing in
	// the state directory, not even the lock file's holder line.
	var lock *state.Lock
	read := d.Read
	if !opts.DryRun {
		var err error
		if lock, err = d.Lock(ctx, holds.StateLock, opts.Lock); err != nil {
			return nil, nil, err
		}
		defer lock.Unlock()
		read = lock.Read
	}

	var hd holds.Doc
	var hist holds.History
	if _, err := read(holds.File, &hd); err != nil {
		return nil, nil, err
	}
	if _, err := read(holds.HistoryFile, &hist); err != nil {
		return nil, nil, err
	}
	observed, err := eng.List(ctx, Managed(scope))
	if err != nil {
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}

	now := opts.Now()
	live := holds.Liveness{Dir: d, StepRunning: StepRunning(observed)}
	classified, err := live.Classify(&hd, now)
	if err != nil {
		return nil, nil, err
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

	in := Input{Desired: desired, Observed: observed, Holds: held, Prune: opts.Prune, Scope: scope}
	items := Plan(in)
	if in.Taken, err = takenNames(ctx, eng, scope, items); err != nil {
		return nil, nil, err
	}
	if len(in.Taken) > 0 {
		items = Plan(in)
	}
	missing, absent, err := missingImages(ctx, eng, items, tried)
	if err != nil {
		return nil, nil, err
	}
	if len(missing) > 0 && !opts.DryRun {
		return nil, missing, nil
	}
	fillReport(rep, items, absent)
	rep.Changed = Changes(items)
	if conflicts := conflictNames(items); len(conflicts) > 0 {
		rep.Changed = false
		rep.EngineCalls = eng.Calls()
		return rep, nil, &ConflictError{Names: conflicts}
	}
	if opts.DryRun {
		rep.EngineCalls = eng.Calls()
		return rep, nil, nil
	}

	if len(rep.Released) > 0 {
		holds.ReleaseStale(&hd, &hist, classified, now)
		for _, v := range rep.Released {
			opts.Progress("released the stale hold of window %s (%s/%s): its process %d is gone\n", v.ID, v.Module, v.Step, v.PID)
		}
		if err := lock.Write(holds.File, &hd); err != nil {
			return nil, nil, err
		}
		if err := lock.Write(holds.HistoryFile, &hist); err != nil {
			return nil, nil, err
		}
		removeDeadSteps(ctx, eng, scope, classified, observed, opts)
	}

	runErr := execute(ctx, Executor{Engine: eng, Scope: scope}, items, absent, rep, opts)
	rep.EngineCalls = eng.Calls()
	if err := record(lock, desired, rep, opts, runErr); err != nil {
		return rep, nil, errors.Join(runErr, err)
	}
	return rep, nil, runErr
}

// removeDeadSteps removes the exited step containers of the stale holds
// just released: their windows died before they could.
func removeDeadSteps(ctx context.Context, eng engine.Client, scope string, classified []holds.Classified, observed []engine.Container, opts Options) {
	for _, c := range classified {
		if c.State != holds.Stale || c.StepContainer == "" {
			continue
		}
		for _, o := range observed {
			if o.Name == c.StepContainer && o.Labels[LabelManaged] == scope && o.Labels[LabelRole] == RoleStep && !o.Running {
				if err := eng.Remove(ctx, o.ID); err != nil && !engine.IsNotFound(err) {
					opts.Progress("remove the dead window's step container %s: %v\n", o.Name, err)
				}
			}
		}
	}
}

// StepRunning answers, from one list call, whether a window's step
// container still runs.
func StepRunning(observed []engine.Container) func(string) bool {
	running := map[string]bool{}
	for _, c := range observed {
		if c.Labels[LabelRole] == RoleStep && c.Running {
			running[c.Name] = true
		}
	}
	return func(name string) bool { return running[name] }
}

// takenNames asks the engine, for each container the plan would create,
// whether an unmanaged container already has its name. Only creates cost a
// request: a no-op apply makes none.
func takenNames(ctx context.Context, eng engine.Client, scope string, items []Item) (map[string]bool, error) {
	taken := map[string]bool{}
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
			taken[it.Name] = true
		}
	}
	return taken, nil
}

// missingImages returns the images that creates and recreates need and the
// engine lacks: to pull (not tried yet, pull policy allows), and absent
// (tried and failed, or pull: never) with why.
func missingImages(ctx context.Context, eng engine.Client, items []Item, tried map[string]error) ([]string, map[string]string, error) {
	absent := map[string]string{}
	var missing []string
	seen := map[string]bool{}
	for _, it := range items {
		if (it.Action != Create && it.Action != Recreate) || seen[it.Desired.Image] {
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
			if why, ok := absent[it.Desired.Image]; ok && (it.Action == Create || it.Action == Recreate) {
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
	for i := range items {
		it := &items[i]
		if it.Action != Create && it.Action != Recreate && it.Action != Remove {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			err := ctx.Err()
			if why, ok := absent[imageOf(it)]; ok && err == nil && it.Action != Remove {
				err = fmt.Errorf("image %s: %s; %s", it.Desired.Image, why, untouched[it.Action])
			} else if err == nil {
				opts.Progress("%s %s\n", progressVerb(it.Action), it.Name)
				switch it.Action {
				case Create:
					err = x.Create(ctx, it.Desired)
				case Recreate:
					err = x.Recreate(ctx, it.Desired, *it.Observed)
				case Remove:
					err = x.Remove(ctx, *it.Observed)
				}
			}
			if err != nil {
				mu.Lock()
				defer mu.Unlock()
				errs = append(errs, fmt.Errorf("%s: %w", it.Name, err))
				cr := &rep.Containers[i]
				cr.Reasons = append(cr.Reasons, it.Action+" failed")
				cr.Action, cr.Error = Failed, err.Error()
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

// record writes the applied desired state and the report.
func record(lock *state.Lock, desired []Desired, rep *Report, opts Options, runErr error) error {
	images := map[string]Resolved{}
	for _, d := range desired {
		images[d.Name] = Resolved{Image: d.Image, Build: d.Build}
	}
	now := opts.Now().UTC()
	a := &Applied{AppliedAt: now, Source: opts.Source, File: opts.File, Images: images}
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
