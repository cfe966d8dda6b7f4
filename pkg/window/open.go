package window

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
)

// open records the hold and stops the held containers, under the state lock.
func (w *window) open(ctx context.Context) error {
	lock, err := w.d.Lock(ctx, holds.StateLock, w.opts.Lock)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	var hd holds.Doc
	var hist holds.History
	if _, err := lock.Read(holds.File, &hd); err != nil {
		return err
	}
	if _, err := lock.Read(holds.HistoryFile, &hist); err != nil {
		return err
	}
	observed, err := w.eng.List(ctx, apply.Managed(w.scope))
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	now := w.opts.Now()
	classified, err := holds.Liveness{Dir: w.d, StepRunning: apply.StepRunning(observed)}.Classify(&hd, now)
	if err != nil {
		return err
	}
	// Re-check under the state lock: a dead window's step container may
	// still be sweeping; its hold stays honoured.
	for _, c := range classified {
		if c.Module == w.module && holds.Honoured(c.State) {
			return &BusyError{Module: w.module, Why: fmt.Sprintf("window %s is %s", c.ID, c.State)}
		}
	}
	released := holds.ReleaseStale(&hd, &hist, classified, now)
	for _, r := range released {
		w.opts.Progress("released the stale hold of window %s (%s/%s): its process %d is gone\n", r.ID, r.Module, r.Step, r.PID)
	}

	byName := map[string]engine.Container{}
	for _, c := range observed {
		byName[c.Name] = c
	}
	h := holds.Hold{ID: w.id, Module: w.module, Step: w.step, PID: os.Getpid(), Containers: w.held,
		Restart: map[string]string{}, OpenedAt: now.UTC(), Deadline: now.Add(w.timeout).UTC()}
	if w.def.Run != nil {
		h.StepContainer = StepContainerName(w.module, w.step)
	}
	for _, name := range w.held {
		if _, ok := byName[name]; !ok {
			continue
		}
		c, err := w.eng.Inspect(ctx, name)
		if err != nil {
			return fmt.Errorf("inspect %s: %w", name, err)
		}
		h.Restart[name] = c.RestartPolicy
	}
	// Record the hold before stopping anything: an apply that takes the lock
	// after ours must already see it.
	hd.Holds = append(hd.Holds, h)
	if err := lock.Write(holds.File, &hd); err != nil {
		return err
	}
	if len(released) > 0 {
		if err := lock.Write(holds.HistoryFile, &hist); err != nil {
			return err
		}
	}
	w.hold, w.openedAt = &h, now
	w.opts.Progress("window %s: holding %s\n", w.id, strings.Join(w.held, ", "))
	var errs []error
	for _, name := range w.held {
		c, ok := byName[name]
		if !ok {
			w.opts.Progress("%s does not exist; the close creates it\n", name)
			continue
		}
		if err := w.eng.SetRestart(ctx, c.ID, "no"); err != nil {
			errs = append(errs, fmt.Errorf("set restart policy of %s to no: %w", name, err))
			continue
		}
		if c.Running {
			if err := w.eng.Stop(ctx, c.ID, apply.StopTimeout); err != nil {
				errs = append(errs, fmt.Errorf("stop %s: %w", name, err))
				continue
			}
		}
		w.opts.Progress("stopped %s\n", name)
	}
	return errors.Join(errs...)
}
