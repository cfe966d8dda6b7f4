package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

// publishWindow publishes this window to the mesh when the ledger is etcd,
// under a lease that lapses if the process dies. It returns what ends the
// publication once the window ended. A window whose hold is gone from d
// leaves the mesh. One whose close kept its hold, failing closed, is left
// to lapse and show as lapsed. The mesh view is never more optimistic than
// the host's own holds. It is best effort. Holds stay local files, so a
// window runs the same with etcd down, with a warning.
func publishWindow(ctx context.Context, env *Env, d *state.Dir, module, step string) (end func()) {
	cfg, err := env.etcdLedger()
	if err != nil || cfg == nil {
		return func() {}
	}
	l, err := openLedgerStore(cfg, nil)
	if err != nil {
		env.Warnf("window not published to the mesh: %v", err)
		return func() {}
	}
	l.Warnf = env.Warnf
	w := ledger.MeshWindow{Host: env.hostName(), Module: module, Step: step, PID: os.Getpid(), OpenedAt: env.Now().UTC()}
	p, err := l.Publish(ctx, w)
	if err != nil {
		l.Close()
		env.Warnf("window not published to the mesh (it runs all the same): %v", err)
		return func() {}
	}
	return func() {
		if holdKept(d, module) {
			p.Leave()
		} else {
			p.Stop()
		}
		l.Close()
	}
}

// holdKept reports whether the holds file still has a hold of this
// process's window on module after the window ended. A close that could
// not bring everything back keeps it. A file that cannot be read counts as
// kept.
func holdKept(d *state.Dir, module string) bool {
	return coord.HoldKept(d, module, os.Getpid())
}

// forgetWait bounds forgetting released windows on the mesh. An etcd that
// does not answer must not hold up the apply that released them.
const forgetWait = 3 * time.Second

// forgetReleasedWindows removes from the mesh the windows of this host
// whose stale holds an apply planned to release. It removes each only once
// the holds file no longer has it. Their process died, and the mesh shows
// them lapsed until then. It is best effort, within forgetWait. It acts
// only where the ledger is etcd and a hold went. So an apply that needs no
// artifact still never contacts etcd otherwise. A dry run releases
// nothing, so it forgets nothing.
func forgetReleasedWindows(env *Env, d *state.Dir, released []coord.View) {
	cfg, err := env.etcdLedger()
	if err != nil || cfg == nil || len(released) == 0 {
		return
	}
	released, err = coord.Gone(d, released)
	if err != nil || len(released) == 0 {
		return
	}
	l, err := openLedgerStore(cfg, nil)
	if err != nil {
		return
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), forgetWait)
	defer cancel()
	for _, v := range released {
		w := ledger.MeshWindow{Host: env.hostName(), Module: v.Module, Step: v.Step, PID: v.PID}
		if err := l.ForgetWindow(ctx, w); err != nil {
			env.Warnf("window %s stays lapsed on the mesh: %v", v.ID, err)
		}
	}
}

type meshJSON struct {
	Windows []ledger.MeshWindow `json:"windows"`
	// Gatherings are the modules' mesh windows (mesh: all), open or last.
	Gatherings []ledger.Gathering `json:"gatherings"`
	Builds     []meshBuildJSON    `json:"builds"`
}

type meshBuildJSON struct {
	Module string `json:"module"`
	ID     string `json:"id"`
	Image  string `json:"image"`
}

// runMeshView prints every host's open windows and each module's current
// build, from the etcd ledger. It serves window list --mesh and status --mesh.
func runMeshView(ctx context.Context, env *Env) error {
	cfg, err := env.etcdLedger()
	if err != nil {
		return err
	}
	if cfg == nil {
		return usageErrorf("--mesh needs an etcd ledger: set --ledger etcd://HOST:PORT[,HOST:PORT…] (or MESHCTL_LEDGER)")
	}
	l, err := openLedgerStore(cfg, nil)
	if err != nil {
		return err
	}
	defer l.Close()
	ws, err := l.MeshWindows(ctx)
	if err != nil {
		return err
	}
	gs, err := l.Gatherings(ctx)
	if err != nil {
		return err
	}
	bs, err := l.Currents(ctx)
	if err != nil {
		return err
	}
	out := meshJSON{Windows: ws, Gatherings: gs}
	if out.Gatherings == nil {
		out.Gatherings = []ledger.Gathering{}
	}
	for _, b := range bs {
		out.Builds = append(out.Builds, meshBuildJSON{Module: b.Module, ID: b.ID, Image: b.Image})
	}
	if env.JSON() {
		return env.PrintJSON(out)
	}
	if env.Global.Quiet {
		return nil
	}
	if err := printGatherings(env.Stdout, gs); err != nil {
		return err
	}
	tw := newTable(env.Stdout)
	fmt.Fprintln(tw, "HOST\tMODULE/STEP\tPID\tOPENED")
	for _, w := range ws {
		lapsed := ""
		if w.Lapsed {
			lapsed = "\tLAPSED: killed or cut off from etcd, its step may still run; check on the host"
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%d\t%s%s\n", w.Host, w.Module, w.Step, w.PID, state.When(w.OpenedAt), lapsed)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "MODULE\tBUILD\tIMAGE")
	for _, b := range out.Builds {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Module, b.ID, b.Image)
	}
	return errors.Join(tw.Flush())
}

// currentBuilds reads the modules' current builds for status from the
// configured ledger. An etcd ledger may not answer, refuse for a wrong
// password, or be being imported. Then it leaves them out, with one
// warning. Status reports the host, which works without etcd.
func currentBuilds(ctx context.Context, env *Env, dir *state.Dir) func(string) (ledger.Build, bool, error) {
	// --ledger was checked before any command ran, so the error is ignored.
	// Were it not, the ledger would be the files.
	cfg, _ := env.etcdLedger()
	var l *ledger.Ledger
	var failed bool
	var err error
	return func(m string) (ledger.Build, bool, error) {
		if failed {
			return ledger.Build{}, false, nil
		}
		if l == nil {
			if l, err = openLedgerStore(cfg, func() (*state.Dir, error) { return dir, nil }); err != nil {
				return ledger.Build{}, false, err
			}
		}
		b, ok, err := l.CurrentBuild(ctx, m)
		var u *ledger.UnreachableError
		var r *ledger.RefusedError
		var im *ledger.ImportingError
		if errors.As(err, &u) || errors.As(err, &r) || errors.As(err, &im) {
			failed = true
			env.Warnf("current builds not shown: %v", err)
			return ledger.Build{}, false, nil
		}
		return b, ok, err
	}
}
