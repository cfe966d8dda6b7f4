package cli

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/spf13/cobra"
)

type applyOptions struct {
	file          string
	last          bool
	dryRun        bool
	prune         bool
	removeModules []string
	parallel      int
	settle        time.Duration
}

func newApplyCmd(env *Env) *cobra.Command {
	opts := &applyOptions{}
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Converge the host's containers to a mesh file",
		Long: `Converge the host's containers to a mesh file (YAML or JSON; -f - reads stdin).

A file owns its modules, not the whole host: the apply converges the modules
the file names and leaves every other module alone, its containers and its part
of the applied state. --prune removes the containers of the file's modules that
it no longer names. --remove-module M removes a whole module (refused, exit 3,
while a window holds it). --last converges every applied module again without a
file: the recovery command after a crash.

Each container gets one action: create, unchanged, recreate (naming each field
that differs, the image with its old and new value, "image: web:1 -> web:2";
"not running": a stopped container nobody holds is broken, or
"restarting": the engine is restarting it after a crash),
held (a live window holds it: left exactly as it is), deferred (held, and its
spec changed, or it depends on a held one: the window applies the change when
it closes), orphan (no longer
in the file; removed with --prune, shown as remove) or conflict (a container
meshctl does not manage has the name: nothing is changed, exit 1).

A create or recreate succeeds only once the new container is healthy: its
healthcheck passes (within start-period + retries x (interval + timeout)), or,
without one, it runs --settle without exiting or being restarted. A recreate
creates the new container before the old one stops (the outage is the old
one's stop and the new one's start), keeps the old one, stopped and renamed
aside, until the new one is healthy, and puts it back if the new one fails: the line says failed, why (unhealthy: <probe
output>, exited 1 after 2s, restarting) and the new container's last log
lines; exit 1. Containers change after those they depends-on; independent ones
in parallel (--parallel counts engine work: a health wait holds no slot). Named volumes are never removed. Missing images are pulled, and
health waited for, without holding the state lock: the containers being
changed are claimed, and a window on them waits for the claim.

A module's networks (meshctl.MODULE.NET) are created before its containers and
shown under them (NETWORK ACTION REASON): create, unchanged, recreate (its
definition changed: made again, its containers stopped meanwhile, then
recreated), orphan, remove (with its module, or --prune), kept (a container is
still attached: a warning says which). A network meshctl did not create is never
removed.

A module with max-unavailable: N (it needs --ledger etcd://…) is taken down
on at most N hosts of the mesh at once: a stop-first recreate of a running
container, or a network replace, first takes the host's slot of the module in
etcd (without the state lock, before the claim; waited for up to
--lock-timeout) and gives it back once the module runs healthy. The apply
records this host (--host-name) as a member of the module when that changed;
a no-op apply makes no etcd call. See meshctl mesh hosts.`,
		Example: `  meshctl apply -f mesh.yaml
  meshctl apply -f mesh.yaml --dry-run -o json   # what would change, changing nothing
  meshctl apply -f mesh.yaml --prune             # also remove containers its modules no longer name
  meshctl apply -f web.yaml                      # converges web only: other modules stay as applied
  meshctl apply --last                           # every applied module again, without a file
  meshctl apply --remove-module old-api          # remove a whole module
  render-mesh | meshctl apply -f -               # the file from stdin`,
		Annotations: map[string]string{exitStatusKey: `  0    converged (containers held by a window are left to it: still 0)
  1    a container could not be converged, a name is taken by a container
       meshctl does not manage, the engine refused or is unreachable, or
       etcd did not answer for a slot (nothing taken down)
  2    bad usage, a mesh file that does not decode, an artifact: without a
       current build, a state file that cannot be read, --last with nothing
       applied, --remove-module of a module never applied, max-unavailable
       without an etcd ledger
  3    the state lock was not had within --lock-timeout, --remove-module
       names a module a live window holds, or a slot of a module's
       max-unavailable was not had within --lock-timeout (its holders named)
  130  interrupted, after cleaning up`},
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch {
			case opts.file != "" && opts.last:
				return &UsageError{Err: errors.New("give either -f FILE or --last, not both"), Cmd: cmd.CommandPath()}
			case opts.file == "" && !opts.last && len(opts.removeModules) == 0:
				return &UsageError{Err: errors.New("apply needs -f FILE (or -f - for stdin), --last, or --remove-module MODULE"), Cmd: cmd.CommandPath()}
			}
			if opts.settle < 0 {
				return &UsageError{Err: fmt.Errorf("--settle must not be negative, not %s", opts.settle), Cmd: cmd.CommandPath()}
			}
			if opts.parallel < 1 {
				return &UsageError{Err: fmt.Errorf("--parallel must be at least 1, not %d", opts.parallel), Cmd: cmd.CommandPath()}
			}
			return runApply(cmd.Context(), env, opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.file, "file", "f", "", "mesh file, YAML or JSON (- for stdin)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "plan and report; change neither the engine nor the state directory")
	f.BoolVar(&opts.last, "last", false, "converge the host to its last applied state, without a file")
	f.BoolVar(&opts.prune, "prune", false, "remove the containers of the file's modules that the file no longer names")
	f.StringArrayVar(&opts.removeModules, "remove-module", nil, "remove a whole module: its containers, its networks (once unused) and its part of the applied state (repeatable)")
	f.IntVar(&opts.parallel, "parallel", 4, "how many containers' engine work (create, stop, start) runs at once; health waits hold no slot")
	f.DurationVar(&opts.settle, "settle", lifecycle.DefaultSettle, "how long a new container without a healthcheck must keep running, not restarting, to count as started")
	return writesMetrics(cmd)
}

func runApply(ctx context.Context, env *Env, opts *applyOptions) error {
	var file *mesh.File
	var in record.DecodeInput
	var cached *record.Cached
	var ahead *apply.Ahead
	defer func() { ahead.Drop() }()
	// The engine's ping goes out first, its answer awaited only where the
	// apply needs it: the file's reading and checks overlap its round trip.
	// An address that cannot be one is reported where it was, after the file.
	eng, engErr := env.Engine()
	if engErr == nil {
		defer eng.Close()
		eng = engine.PingAhead(ctx, eng)
	}
	source := "--last"
	if opts.file != "" {
		var err error
		if file, in, cached, ahead, err = loadMeshCached(ctx, env, opts.file, lockAhead(ctx, env, opts, eng)); err != nil {
			return err
		}
		source = sourceName(opts.file)
		for _, m := range opts.removeModules {
			if _, ok := file.Modules[m]; ok {
				return &UsageError{Err: fmt.Errorf("--remove-module %s: the file names module %s; remove it from the file, or do not remove it", m, m)}
			}
		}
	} else if !opts.last {
		source = "--remove-module " + strings.Join(opts.removeModules, ",")
	}
	openState := env.State
	if opts.dryRun {
		openState = env.StateReadOnly // a dry run creates nothing
	}
	dir, err := openState()
	if err != nil {
		return err
	}
	if engErr != nil {
		return engErr
	}
	run := applyRun(ctx, env, opts, dir, source)
	run.File, run.Decode, run.Cached, run.Ahead = file, in, cached, ahead
	budget, m, closeBudget, err := meshAndBudget(env, dir)
	if err != nil {
		return err
	}
	defer closeBudget()
	run.Budget, run.Mesh = budget, m
	rep, err := apply.Run(ctx, dir, eng, run)
	if errors.Is(err, apply.ErrStaleDecode) {
		// applied.json changed since the cache was read: decode after all.
		if run.File, err = decodeMesh(ctx, in.Src); err != nil {
			return err
		}
		run.Cached, run.Ahead = nil, nil
		rep, err = apply.Run(ctx, dir, eng, run)
	}
	if rep != nil {
		if perr := printApply(env, opts, dir, rep, err); perr != nil {
			return perr
		}
	}
	return err
}

// lockAhead returns what takes the state lock and the engine's list as
// the apply starts (apply.StartAhead), for a file the decode cache is
// likely to hold: its reading and lookup then overlap the engine's answer.
// It is nil where the apply could not use them: a dry run, an engine
// address that is none, or a module to remove (its checks come first).
func lockAhead(ctx context.Context, env *Env, opts *applyOptions, eng engine.Client) func() *apply.Ahead {
	if opts.dryRun || eng == nil || len(opts.removeModules) > 0 {
		return nil
	}
	return func() *apply.Ahead {
		d, err := env.State()
		if err != nil {
			return nil
		}
		return apply.StartAhead(ctx, d, eng, env.LockOptions("state lock"))
	}
}

// applyRun is the apply's options, but for its file.
func applyRun(ctx context.Context, env *Env, opts *applyOptions, dir *state.Dir, source string) apply.Options {
	return apply.Options{
		Source:        source,
		Last:          opts.last,
		DryRun:        opts.dryRun,
		Prune:         opts.prune,
		RemoveModules: opts.removeModules,
		Parallel:      opts.parallel,
		Settle:        opts.settle,
		Resolve:       artifactResolver(ctx, env, dir),
		Lock:          env.LockOptions("state lock"),
		Now:           env.Now,
		Progress:      env.Progressf,
		Warn:          env.Warnf,
		Status:        env.StatusFunc(),
		PullOutput:    env.Progress().PullOutput(),
	}
}

// printApply writes an apply's report, as JSON or as text. err is the
// apply's. It returns the error of a JSON document that cannot be made.
func printApply(env *Env, opts *applyOptions, dir *state.Dir, rep *record.Report, err error) error {
	forgetReleasedWindows(env, dir, rep.Released)
	env.Log.Debug("apply finished", "changed", rep.Changed, "engine_calls", rep.EngineCalls, "containers", len(rep.Containers))
	if env.JSON() {
		return env.PrintJSON(rep)
	}
	if env.Global.Quiet && err == nil {
		return nil
	}
	printApplyReport(env, rep)
	if err == nil && !rep.DryRun {
		for _, m := range opts.removeModules {
			// Said also when the module had no container left. An empty
			// table alone says nothing of it.
			fmt.Fprintf(env.Stdout, "module %s removed: its containers and its part of the applied state\n", m)
		}
	}
	return nil
}

// meshAndBudget is what takes the slots of modules with max-unavailable.
// It also writes the member records of modules that use the mesh. It is
// nil when the ledger is files: a file that uses max-unavailable or mesh:
// all is then refused. The Mesh is what a dead mesh window's hold is
// classified and released with, and where mesh windows gather. Its Gather
// is nil when the ledger is files: such a hold then stays. The etcd client
// dials only when a hold of a dead mesh window is asked about, or a budget
// or a gathering needs etcd.
func meshAndBudget(env *Env, dir *state.Dir) (*coord.Budget, coord.Mesh, func(), error) {
	m, l, err := openMesh(env)
	if err != nil || l == nil {
		return nil, m, func() {}, err
	}
	b := &coord.Budget{Dir: dir, Store: l, Host: m.Host, Wait: env.Global.LockTimeout, Now: env.Now,
		Progress: env.Progressf}
	return b, m, func() { b.Close(); l.Close() }, nil
}

// sourceName is how a mesh file is named in the records. It is an absolute
// path, so that status read from elsewhere says which file it was.
func sourceName(path string) string {
	if path == "-" {
		return path
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// artifactResolver resolves artifact: MODULE to the module's current build
// in the configured ledger. It reads once each time. That read is a
// lock-free snapshot of the module's file, or one linearizable etcd read.
// An etcd ledger is contacted only when the file needs an artifact.
func artifactResolver(ctx context.Context, env *Env, dir *state.Dir) record.Resolver {
	var l *ledger.Ledger
	resolved := map[string]bool{}
	return func(module string) (string, string, bool, error) {
		if l == nil {
			cfg, err := env.etcdLedger()
			if err != nil {
				return "", "", false, err
			}
			if l, err = openLedgerStore(cfg, func() (*state.Dir, error) { return dir, nil }); err != nil {
				return "", "", false, err
			}
		}
		// apply resolves each module before its state lock, then again under
		// it. The re-read is bounded, so an etcd gone meanwhile does not hold
		// the lock, and the host's windows, for --lock-timeout.
		read := l.CurrentBuild
		if resolved[module] {
			read = l.CurrentBuildAgain
		}
		b, ok, err := read(ctx, module)
		if err != nil || !ok {
			return "", "", ok, err
		}
		resolved[module] = true
		return b.Image, b.ID, true, nil
	}
}

func printApplyReport(env *Env, rep *record.Report) {
	tw := newTable(env.Stdout)
	if len(rep.Containers) > 0 {
		// No header over no rows. The lines below say what was done.
		fmt.Fprintln(tw, "CONTAINER\tACTION\tREASON")
	}
	for _, c := range rep.Containers {
		reason := strings.Join(c.Reasons, ", ")
		if c.Build != "" {
			reason = strings.TrimPrefix(reason+", build "+c.Build, ", ")
		}
		if c.Error != "" {
			reason += ": " + c.Error
		}
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Action, reason)
		for _, l := range c.Log {
			// Under REASON, as the row's last cell, so it widens no column.
			fmt.Fprintf(tw, "\t\t| %s\n", l)
		}
	}
	tw.Flush()
	printNetworks(env, rep.Networks)
	for _, w := range rep.Windows {
		line := w.Describe()
		if todo := w.ToDo(); todo != "" {
			line += "; " + todo
		}
		fmt.Fprintln(env.Stdout, line)
	}
	for _, w := range rep.Released {
		fmt.Fprintf(env.Stdout, "released stale hold of window %s %s/%s (process %d gone), held %s\n",
			w.ID, w.Module, w.Step, w.PID, strings.Join(w.Containers, ", "))
	}
	if rep.DryRun {
		fmt.Fprintln(env.Stdout, "dry run: nothing was changed")
	}
}

// printNetworks writes the report's network lines, as a table of its own
// under the containers'.
func printNetworks(env *Env, nets []record.NetworkReport) {
	if len(nets) == 0 {
		return
	}
	tw := newTable(env.Stdout)
	fmt.Fprintln(tw, "NETWORK\tACTION\tREASON")
	for _, n := range nets {
		reason := strings.Join(n.Reasons, ", ")
		if reason == "" {
			reason = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", n.Name, n.Action, reason)
	}
	tw.Flush()
}
