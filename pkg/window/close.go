package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// close brings each held container to what the most recent apply wants,
// restores restart policies, drops the hold and appends the window to the
// history, under the state lock. It runs on every path, with a context that
// outlives a signal.
func (w *window) close(ctx context.Context) (*holds.Entry, error) {
	interrupted := ctx.Err() != nil
	ctx = apply.CleanupContext(ctx, cleanupTimeout)
	lock, err := w.d.Lock(ctx, holds.StateLock, state.LockOptions{Timeout: max(w.opts.Lock.Timeout, closeLockWait), What: "state lock"})
	if err != nil {
		return nil, fmt.Errorf("close window %s: %w; its containers stay stopped until the next apply", w.id, err)
	}
	defer lock.Unlock()

	// A run: step whose container could not be stopped may still be
	// sweeping: bringing the held containers back now is the incident this
	// window exists to prevent. The hold stays; it reads orphaned once this
	// process is gone, and stale (released, the containers converged) once
	// the container exits.
	if name, running := w.stepStillRuns(ctx); running {
		err := fmt.Errorf("window %s on %s/%s: its step container %s still runs and could not be stopped; "+
			"the hold stays so nothing is started mid-step; once it exits, the next apply or window releases "+
			"the hold and brings %s back", w.id, w.module, w.step, name, strings.Join(w.held, ", "))
		return nil, &FailedError{Err: errors.Join(w.stepErr, err), Interrupted: interrupted}
	}

	// The most recent apply may have come mid-window: read what it wants now.
	applied, ok, err := apply.LoadApplied(w.d)
	if err != nil {
		return nil, err
	}
	desired := w.desired
	if ok {
		all, err := applied.Desired()
		if err != nil {
			return nil, err
		}
		desired = map[string]*apply.Desired{}
		for i := range all {
			desired[all[i].Name] = &all[i]
		}
	}
	convergeErr := w.bringBack(ctx, desired)

	var hd holds.Doc
	var hist holds.History
	if _, err := lock.Read(holds.File, &hd); err != nil {
		return nil, err
	}
	if _, err := lock.Read(holds.HistoryFile, &hist); err != nil {
		return nil, err
	}
	now := w.opts.Now()
	if w.result == "" {
		w.result = ResultFailed
	}
	if interrupted {
		w.result = ResultInterrupted
	}
	e := holds.Entry{ID: w.id, Module: w.module, Step: w.step, OpenedAt: w.openedAt.UTC(), ClosedAt: now.UTC(),
		Result: w.result, StepExitCode: w.stepCode}
	failure := errors.Join(w.openErr, w.stepErr, convergeErr)
	if failure != nil {
		if e.Result == ResultOK {
			e.Result = ResultFailed
		}
		e.Error = failure.Error()
	}
	hd.Drop(w.id)
	hist.Append(e)
	if err := lock.Write(holds.File, &hd); err != nil {
		return &e, err
	}
	if err := lock.Write(holds.HistoryFile, &hist); err != nil {
		return &e, err
	}
	w.opts.Progress("window %s closed after %s: %s\n", w.id, now.Sub(w.openedAt).Round(time.Millisecond), e.Result)
	if failure != nil || interrupted {
		if failure == nil {
			failure = errors.New("interrupted")
		}
		return &e, &FailedError{Entry: e, Err: fmt.Errorf("window %s on %s/%s: %w", w.id, w.module, w.step, failure), Interrupted: interrupted}
	}
	return &e, nil
}

// stepStillRuns reports whether this window's run: step container still
// runs, after the step ended or was killed.
func (w *window) stepStillRuns(ctx context.Context) (string, bool) {
	if w.hold == nil || w.hold.StepContainer == "" {
		return "", false
	}
	c, err := w.eng.Inspect(ctx, w.hold.StepContainer)
	if err != nil {
		// Gone (the usual case: removed after the step) or unknowable; an
		// engine that cannot answer cannot start the held containers either.
		return "", false
	}
	return c.Name, c.Running && c.Labels[apply.LabelWindow] == w.id
}

// bringBack starts each held container again, or recreates it where the
// most recent apply wants another spec (a change deferred mid-window), or
// creates it where it went missing.
func (w *window) bringBack(ctx context.Context, desired map[string]*apply.Desired) error {
	if w.hold == nil {
		return nil
	}
	x := apply.Executor{Engine: w.eng, Scope: w.scope}
	observed, err := w.eng.List(ctx, apply.Managed(w.scope))
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	byName := map[string]engine.Container{}
	for _, c := range observed {
		byName[c.Name] = c
	}
	var errs []error
	for _, name := range w.held {
		c, exists := byName[name]
		d := desired[name]
		var diff []string
		if exists && d != nil {
			diff = apply.SpecDiff(c, d.Spec)
		}
		var err error
		switch {
		case !exists && d == nil:
			continue
		case !exists:
			w.opts.Progress("creating %s\n", name)
			err = x.Create(ctx, d)
		case len(diff) > 0:
			w.opts.Progress("recreating %s: an apply deferred a change (%s)\n", name, strings.Join(diff, ", "))
			if err = x.Recreate(ctx, d, c); err != nil {
				// The old container is back as it was: stopped. Run it.
				err = errors.Join(err, w.restartAsBefore(ctx, c, d))
			}
		default:
			err = w.restartAsBefore(ctx, c, d)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		w.opts.Progress("started %s again\n", name)
	}
	return errors.Join(errs...)
}

// restartAsBefore puts the container's restart policy back and starts it.
// The policy is the one the last apply wants, where one was applied: the
// policy seen at open may be the "no" of a dead window that held the
// container before, which nothing else would ever undo.
func (w *window) restartAsBefore(ctx context.Context, c engine.Container, d *apply.Desired) error {
	policy := w.hold.Restart[c.Name]
	if d != nil {
		policy = d.EngineSpec(w.scope).Restart
	}
	if policy == "" {
		policy = mesh.DefaultRestart
	}
	if err := w.eng.SetRestart(ctx, c.ID, policy); err != nil {
		return fmt.Errorf("restore restart policy %s: %w", policy, err)
	}
	if err := w.eng.Start(ctx, c.ID); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	return nil
}
