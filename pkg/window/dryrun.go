package window

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// DryRun is what a window would do if it were run now. DryRunOf makes it.
type DryRun struct {
	Module string `json:"module"`
	Step   string `json:"step"`
	// Holds are the containers the window would hold, each with its mode.
	Holds   []HeldAs `json:"holds"`
	Run     StepRun  `json:"run"`
	Timeout string   `json:"timeout"`
	// Mesh is "all" for a mesh window, with its gather and the hosts that
	// must join it (the module's members in etcd, or the open gathering's).
	// Else all three are left out.
	Mesh   string   `json:"mesh,omitempty"`
	Gather string   `json:"gather,omitempty"`
	Hosts  []string `json:"hosts,omitempty"`
	// Verdict is what a real run would do now: one of the Verdict constants.
	Verdict string `json:"verdict"`
	// Reasons are what each check of the open found, in the open's order.
	Reasons []string `json:"reasons"`
}

// HeldAs is a container a window would hold, and how it would hold it.
type HeldAs struct {
	Name string `json:"name"`
	Mode string `json:"mode"`
}

// The modes a step holds a container in. ModeStopped holds it stopped
// for the step's whole run. ModeChanged runs a changed copy under its
// name, its normal one aside.
const (
	ModeStopped = "stopped"
	ModeChanged = "changed"
)

// modeOf is how the step holds container name.
func (p *plan) modeOf(name string) string {
	if p.isChanged(name) {
		return ModeChanged
	}
	return ModeStopped
}

// StepRun is what a step runs. A run step has an image, an exec step not.
type StepRun struct {
	Kind        string   `json:"kind"` // "run" or "exec"
	Image       string   `json:"image,omitempty"`
	Entrypoint  []string `json:"entrypoint,omitempty"`
	Command     []string `json:"command"`
	VolumesFrom []string `json:"volumes_from,omitempty"`
	Network     string   `json:"network,omitempty"`
}

// Verdicts of a dry run. A refusal of the open outranks a wait.
const (
	VerdictRun    = "run"    // it would open and run the step
	VerdictWait   = "wait"   // it would wait for an apply or a window, then run
	VerdictBusy   = "busy"   // another window holds the module (exit 3)
	VerdictFail   = "fail"   // it would fail before stopping anything (exit 1)
	VerdictRefuse = "refuse" // bad input, such as a missing program (exit 2)
)

// DryRunOf checks what a window's open checks, and changes nothing. It
// takes no lock a real command waits for. It reads snapshots, and asks
// who holds a lock as status does. It pulls, heals and releases nothing.
// The error it returns is the one a real run would end with now. Where
// the step cannot be resolved, it returns no DryRun.
func DryRunOf(ctx context.Context, d *state.Dir, eng engine.Client, opts Options) (*DryRun, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p, err := resolve(d, opts)
	if err != nil {
		return nil, err
	}
	scope, err := lifecycle.PeekScope(d)
	if err != nil {
		return nil, err
	}
	r := &dryRun{w: &window{d: d, eng: eng, opts: opts, plan: p, scope: scope}}
	r.rep = &DryRun{Module: p.module, Step: p.step, Holds: []HeldAs{}, Timeout: p.timeout.String(),
		Verdict: VerdictRun, Reasons: []string{}}
	for _, name := range p.held {
		r.rep.Holds = append(r.rep.Holds, HeldAs{Name: name, Mode: p.modeOf(name)})
	}
	if p.def.MeshAll() {
		r.rep.Mesh, r.rep.Gather = mesh.MeshAll, p.def.GatherOrDefault().String()
	}
	if err := eng.Ping(ctx); err != nil {
		r.rep.Run = r.declaredRun()
		r.refuse(err)
		return r.rep, r.err
	}
	busy := r.checkModule()
	r.checkMesh(ctx)
	r.checkSlot()
	r.checkStep(ctx)
	r.checkOpen(ctx, busy)
	return r.rep, r.err
}

// dryRun is a dry run's progress through the open's checks.
type dryRun struct {
	w   *window
	rep *DryRun
	err error // the first refusal, the real run's error
}

// note adds what a check found.
func (r *dryRun) note(format string, args ...any) {
	r.rep.Reasons = append(r.rep.Reasons, fmt.Sprintf(format, args...))
}

// wait notes something the real run would wait for.
func (r *dryRun) wait(format string, args ...any) {
	r.note(format, args...)
	if r.rep.Verdict == VerdictRun {
		r.rep.Verdict = VerdictWait
	}
}

// refuse notes a check that fails the open. The first refusal is the
// real run's, since the open stops there.
func (r *dryRun) refuse(err error) {
	r.note("%v", err)
	if r.err != nil {
		return
	}
	r.err = err
	var f interface{ Fault() fault.Kind }
	switch {
	case errors.As(err, &f) && f.Fault() == fault.Busy:
		r.rep.Verdict = VerdictBusy
	case errors.As(err, &f) && f.Fault() == fault.BadInput:
		r.rep.Verdict = VerdictRefuse
	default:
		r.rep.Verdict = VerdictFail
	}
}

// checkModule asks whether another window holds the module's window lock.
// It never takes the lock. It says whether one does.
func (r *dryRun) checkModule() bool {
	w := r.w
	lock := coord.ModuleLock(w.module)
	held, err := w.d.Held(lock)
	switch {
	case err != nil:
		r.refuse(err)
	case held:
		r.busy(moduleBusy(w.module, w.d.HolderOf(lock)))
	default:
		r.note("no other window on module %s is open", w.module)
	}
	return held
}

// busy notes another window on the module. A real run waits for it with
// --wait, else it exits at once.
func (r *dryRun) busy(b *BusyError) {
	if r.w.opts.Wait > 0 {
		r.wait("a window on module %s is open (%s): would wait up to %s for it", b.Module, b.Why, r.w.opts.Wait)
		return
	}
	r.refuse(b)
}

// checkStep checks the step as the open does, and says what it runs.
func (r *dryRun) checkStep(ctx context.Context) {
	c, err := r.w.checkStep(ctx)
	r.rep.Run = r.stepRun(ctx)
	switch {
	case err != nil:
		r.refuse(err)
	case r.w.def.Run == nil:
		r.note("program %s is there and executable", r.w.def.Exec[0])
	case c.present:
		r.note("image %s is present", c.image)
	default:
		r.note("image absent: would pull %s", c.image)
	}
}

// stepRun says what the step runs. It asks the engine for the image and
// volumes a step takes from a held container.
func (r *dryRun) stepRun(ctx context.Context) StepRun {
	run := r.declaredRun()
	if r.w.def.Run != nil {
		if spec, err := r.w.stepSpec(ctx); err == nil {
			run.Image, run.VolumesFrom, run.Network = spec.Image, spec.VolumesFrom, spec.NetworkMode
		}
	}
	return run
}

// declaredRun is the step as the file declares it. It serves when the
// engine cannot be asked for the image and volumes it would resolve.
func (r *dryRun) declaredRun() StepRun {
	w := r.w
	if w.def.Run == nil {
		return StepRun{Kind: "exec", Command: w.def.Exec}
	}
	return StepRun{Kind: "run", Image: w.def.Run.Image, Entrypoint: w.def.Run.Entrypoint, Command: w.def.Run.Command}
}

// checkOpen makes the checks the open makes under the state lock, from
// snapshots. An apply's live claim is waited for, as the open waits.
// moduleBusy says that another window holds the module's window lock.
func (r *dryRun) checkOpen(ctx context.Context, moduleBusy bool) {
	w := r.w
	err := coord.CheckClaims(w.d, w.d.Read, w.held)
	var ce *coord.ClaimedError
	switch {
	case errors.As(err, &ce):
		r.wait("would wait for apply (pid %d), which is changing %s", ce.Claim.PID, strings.Join(ce.Claim.Containers, ", "))
	case err != nil:
		r.refuse(err)
		return
	default:
		r.note("no apply is changing %s", strings.Join(w.held, ", "))
	}
	ws, err := coord.ObserveMesh(ctx, w.d, w.d.Read, w.eng, w.scope, w.opts.Now(), w.meshOf())
	if err != nil {
		r.refuse(err)
		return
	}
	// The module's window lock said so already, when another window lives.
	if b := busyOn(ws, w.module); b != nil && !moduleBusy {
		r.busy(b)
	}
	for _, c := range ws.Classified {
		if c.State == coord.Stale {
			r.note("would release stale window %s of module %s, bringing back %s", c.ID, c.Module, strings.Join(c.Containers, ", "))
		}
	}
	r.checkHeld(ctx, servicesOf(ws.Observed, w.scope))
}

// checkHeld says what the open would do with each held container.
func (r *dryRun) checkHeld(ctx context.Context, services map[string]engine.Container) {
	w := r.w
	for _, name := range w.held {
		c, ok := services[name]
		if !ok {
			if err := w.checkAbsent(ctx, name); err != nil {
				r.refuse(err)
				continue
			}
			r.note("%s does not exist: the close would create it", name)
		} else {
			r.note("%s is %s: would set its restart policy to no and stop it", name, engine.StateOf(c, w.opts.Now()))
		}
		if !w.isChanged(name) {
			continue
		}
		if err := w.changeable(name); err != nil {
			r.refuse(err)
			continue
		}
		if _, left := services[lifecycle.HeldName(name)]; left {
			// The open's heal deals with it first, as with any leftover.
			r.note("%s is left by a window that is gone: would put it back first", lifecycle.HeldName(name))
		}
		r.note("would set %s aside as %s and run it changed until the close", name, lifecycle.HeldName(name))
	}
}

// checkMesh says what a mesh window's join would do in etcd: open a
// gathering, join the open one, or be refused, and which hosts must join.
// It asks the ledger as the join decides, and writes nothing. A window of
// this host only on a module with a mesh step is refused beside an open one.
func (r *dryRun) checkMesh(ctx context.Context) {
	w := r.w
	switch {
	case w.def.MeshAll() && w.opts.Gather == nil:
		r.refuse(errNoGatherStore(w.module, w.step))
		return
	case !w.def.MeshAll():
		if err := w.refuseBesideGathering(ctx); err != nil {
			r.refuse(err)
		}
		return
	}
	p, err := w.opts.Gather.PreviewJoin(ctx, w.join())
	r.rep.Hosts = p.Hosts
	g := p.Gathering
	switch {
	case err != nil:
		r.refuse(gatherFailed(err))
	case p.Create:
		r.note("mesh window: would open the gathering of %s/%s and run the step on this host (%s), once %s joined (gather %s)",
			w.module, w.step, w.opts.Host, ledger.HostsNamed(p.Hosts), w.def.GatherOrDefault())
	default:
		r.note("mesh window: would join gathering %s (runner %s; waiting for %s, until %s)",
			g.ID, g.Runner, strings.Join(g.Missing(), ", "), state.When(g.Deadline))
	}
}

// checkSlot says that the window would take a slot of its module's budget.
func (r *dryRun) checkSlot() {
	w := r.w
	if !w.takesSlot() {
		return
	}
	if err := w.opts.Budget.Check([]string{w.module}); err != nil {
		r.refuse(err)
		return
	}
	r.note("would take a slot of module %s (max-unavailable %d) before holding %s stopped", w.module, w.budget, strings.Join(w.stopped(), ", "))
}
