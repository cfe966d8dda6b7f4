package window

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// open records the hold under the state lock. Then it stops the held
// containers with the lock released. The recorded hold already protects
// them, since every apply that plans after it leaves them alone. So a
// slow graceful stop holds up no other window and no apply.
func (w *window) open(ctx context.Context) error {
	stop, err := w.recordUnclaimed(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range stop {
		// Restart policy first. An engine restart between the stop and the
		// policy change must not revive the container.
		if err := w.eng.SetRestart(ctx, c.ID, "no"); err != nil {
			errs = append(errs, fmt.Errorf("set restart policy of %s to no: %w", c.Name, err))
			continue
		}
		// Stop it whatever the listing said. A container that read created
		// or exited may have a start in flight in the engine. An apply killed
		// mid-recreate sent it, and the engine carries it out before this
		// stop. A stop of a stopped container changes nothing. See
		// docs/model/README.md, "A new container's start in flight".
		if engine.StateOf(c, w.openedAt) != engine.Stopped {
			w.status(c.Name, fmt.Sprintf("stopping (up to %s)…", lifecycle.StopTimeoutOf(c)))
		}
		// Seen through after a signal. The close then starts it again once
		// it has stopped, not while the engine is still stopping it.
		if err := lifecycle.StopThrough(ctx, w.eng, c.ID, lifecycle.StopTimeoutOf(c)); err != nil {
			w.status(c.Name, "stop failed")
			errs = append(errs, fmt.Errorf("stop %s: %w", c.Name, err))
			continue
		}
		if w.opts.Status != nil {
			w.status(c.Name, "stopped")
		} else {
			w.opts.Progress("stopped %s\n", c.Name)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return w.switchAll(ctx, stop)
}

// switchAll starts the changed copy of each container held changed, once
// every held container has stopped. The switch is a stop, then a start.
// The two may share a port or a volume. The first that fails ends the
// open, and the close puts every normal one back.
func (w *window) switchAll(ctx context.Context, stopped []engine.Container) error {
	for _, name := range w.changedNames() {
		var normal *engine.Container
		if i := slices.IndexFunc(stopped, func(c engine.Container) bool { return c.Name == name }); i >= 0 {
			normal = &stopped[i]
		}
		if err := w.switchToChanged(ctx, name, normal); err != nil {
			return err
		}
	}
	return nil
}

// record records the hold under the state lock, and returns the held
// containers to stop. Under the same lock it releases the holds of dead
// windows, bringing their containers back, and re-checks that no window on
// this module is still honoured.
func (w *window) record(ctx context.Context) ([]engine.Container, error) {
	lock, err := w.d.Lock(ctx, coord.StateLock, w.opts.Lock)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	// An apply carrying out its plan on these containers finishes first.
	// recordUnclaimed waits for it, then comes back here.
	if err := coord.CheckClaims(w.d, lock.Read, w.held); err != nil {
		return nil, err
	}
	var a record.Applied
	if _, err := lock.Read(record.AppliedFile, &a); err != nil {
		return nil, err
	}
	// Another module's unreadable env-file is not this window's concern.
	// Its containers only lose their policy for a dead window's release.
	// That release then keeps the policy recorded at that window's open.
	all, _, err := a.DesiredFor(w.d, w.module)
	if err != nil {
		return nil, err
	}
	now := w.opts.Now()
	ws, err := coord.ObserveMesh(ctx, w.d, lock.Read, w.eng, w.scope, now, w.meshOf())
	if err != nil {
		return nil, err
	}
	// A dead mesh window of this host, whose step has exited, records the
	// step's end first. Its hold is then stale, and released below.
	coord.RecordEnds(ctx, lifecycle.Executor{Engine: w.eng, Scope: w.scope}, ws, now, w.opts.Progress)
	// Re-check under the state lock. A dead window's step container may
	// still be sweeping, and then its hold stays honoured.
	if busy := busyOn(ws, w.module); busy != nil {
		return nil, busy
	}
	x := lifecycle.Executor{Engine: w.eng, Scope: w.scope}
	// What dead applies left on the held containers is healed first. Held
	// as it is, the window would hold an unverified new container, while
	// the last good one waits aside. Their parts on other containers stay
	// for the next apply. A recreate's leftover of a held container goes
	// too, or nothing is held. A copy running aside would answer the
	// service's name through the step.
	if err := coord.HealClaims(ctx, lock, x, ws, w.held, w.opts.Progress); err != nil {
		return nil, fmt.Errorf("nothing held: %w", err)
	}
	var policies map[string]string
	if ws.StaleCount() > 0 {
		policies = lifecycle.RestartPolicies(w.scope, all)
	}
	if _, err := coord.ReleaseStale(ctx, lock, x, ws, policies, now, w.opts.Progress); err != nil {
		return nil, err
	}
	h, stop, err := w.holdOf(ctx, ws.Observed, now)
	if err != nil {
		return nil, err
	}
	if err := coord.AddHold(lock, ws, h); err != nil {
		return nil, err
	}
	w.hold, w.openedAt = &h, now
	w.opts.Progress("window %s: holding %s\n", w.id, strings.Join(w.held, ", "))
	return stop, nil
}

// busyOn returns a *BusyError when a hold on module is still honoured.
// A dead window's step container that still sweeps keeps its hold honoured.
func busyOn(ws *coord.Windows, module string) *BusyError {
	for _, c := range ws.Classified {
		if c.Module == module && coord.Honoured(c.State) {
			return &BusyError{Module: module, Why: fmt.Sprintf("window %s is %s", c.ID, c.State)}
		}
	}
	return nil
}

// servicesOf returns the service containers of observed, by engine name.
func servicesOf(observed []engine.Container, scope string) map[string]engine.Container {
	services := map[string]engine.Container{}
	for _, c := range observed {
		if lifecycle.IsService(c, scope) {
			services[c.Name] = c
		}
	}
	return services
}

// holdOf returns this window's hold, with the restart policy of each held
// container, and the held containers to stop. A held container that does
// not exist is created by the close.
func (w *window) holdOf(ctx context.Context, observed []engine.Container, now time.Time) (coord.Hold, []engine.Container, error) {
	services := servicesOf(observed, w.scope)
	h := coord.Hold{ID: w.id, Module: w.module, Step: w.step, PID: os.Getpid(), Containers: w.held,
		Restart: map[string]string{}, OpenedAt: now.UTC(), Deadline: now.Add(w.timeout).UTC()}
	if w.def.Run != nil {
		h.StepContainer = StepContainerName(w.module, w.step)
	}
	if w.guard != nil {
		h.StepGroup = w.guard.pgid
	}
	w.meshHold(&h)
	var stop []engine.Container
	for _, name := range w.held {
		c, ok := services[name]
		if !ok {
			if err := w.checkAbsent(ctx, name); err != nil {
				return h, nil, err
			}
			if err := w.holdChanged(&h, name, nil, services); err != nil {
				return h, nil, err
			}
			w.opts.Progress("%s does not exist; the close creates it\n", name)
			continue
		}
		full, err := w.eng.Inspect(ctx, c.ID)
		if err != nil {
			return h, nil, fmt.Errorf("inspect %s: %w", name, err)
		}
		h.Restart[name] = full.RestartPolicy
		if err := w.holdChanged(&h, name, &c, services); err != nil {
			return h, nil, err
		}
		stop = append(stop, c)
	}
	return h, stop, nil
}

// holdChanged records in h how name is held changed, when the step holds
// it so. c is the normal container, nil when there is none.
func (w *window) holdChanged(h *coord.Hold, name string, c *engine.Container, services map[string]engine.Container) error {
	if !w.isChanged(name) {
		return nil
	}
	ch, err := w.changedHold(name, c, services)
	if err != nil {
		return err
	}
	if h.Changed == nil {
		h.Changed = map[string]coord.Changed{}
	}
	h.Changed[name] = ch
	return nil
}

// checkAbsent makes sure that a held container the listing does not have
// is absent from the engine, not merely someone else's. A container of
// that name started by hand, or by another state directory, would run
// through the step. The window cannot stop or start it. Such a container,
// or an engine that cannot say, refuses the window before anything is
// held. It fails closed.
func (w *window) checkAbsent(ctx context.Context, name string) error {
	c, err := w.eng.Inspect(ctx, name)
	switch {
	case engine.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("inspect %s: %w; nothing held", name, err)
	}
	owner := c.Labels[lifecycle.LabelManaged]
	if owner != "" && owner != w.scope {
		return foreign(name, "is managed by another meshctl state directory (id "+owner+"); check --state-dir")
	}
	return foreign(name, "exists and meshctl does not manage it (started by hand?); rename or remove it, then run the window again")
}

// foreign is a window refused because a container it would hold is not
// this state directory's, though it has that name (exit 1). The step would
// run with it up.
func foreign(name, why string) error {
	return fault.New(fault.Failed, "nothing held: a container named %s %s", name, why)
}

// desiredByName returns the containers an applied state wants, by engine
// name. It returns none where nothing was applied. Only module's own files
// can fail it, in record.Applied.DesiredFor. d is the state directory,
// whose secret key hashes secret files.
func desiredByName(d *state.Dir, a *record.Applied, module string) (map[string]*lifecycle.Desired, error) {
	all, _, err := a.DesiredFor(d, module)
	if err != nil {
		return nil, err
	}
	return byName(all), nil
}

// byName indexes desired containers by engine name.
func byName(all []lifecycle.Desired) map[string]*lifecycle.Desired {
	out := map[string]*lifecycle.Desired{}
	for i := range all {
		out[all[i].Name] = &all[i]
	}
	return out
}
