package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/spf13/cobra"
)

type windowRunOptions struct {
	module, step string
	file         string
	timeout      time.Duration
	wait         time.Duration
	settle       time.Duration
	dryRun       bool
}

func newWindowRunCmd(env *Env) *cobra.Command {
	opts := &windowRunOptions{}
	cmd := &cobra.Command{
		Use:   "run MODULE STEP [-f FILE] [--dry-run]",
		Short: "Run a module's maintenance step with its containers held stopped or changed",
		Long: `Run a module's maintenance step with some of its containers held: stopped
(while-stopped), or running changed (while-changed).

The step comes from -f FILE, else from the last applied desired state (a cron
line needs no file). Only one window per module runs at a time: another one
exits 3 at once, or waits up to --wait.

The window records a hold under the state lock and releases the lock; then it
sets the held containers' restart policy to "no" (an engine restart must not
revive them) and stops them. A while-changed container, once stopped, is set
aside as NAME.meshctl-held, and a copy with the step's changes (env, command,
...) runs under its name until the close: a registry made read-only serves
pulls through the sweep. An apply arriving mid-window is planned at once and
leaves the held containers alone, stopped or changed. The step runs with its
output streamed to stderr and is killed past its timeout. The window then
closes on every path (success, failure, timeout, SIGINT, SIGTERM): each held
container (its changed copy removed, the normal one put back) is brought to
what the most recent apply wants (started again, or recreated where an apply
reported it deferred during this window, else started as it was and any drift
reported; after a signal it is started again as it was, and the change left to
the next apply) and its restart policy restored. Then the changes an apply
deferred to what depends on a held container are carried out.

A step with mesh: all is a mesh window: the same cron line on every host that
runs the module joins one gathering in etcd (needs --ledger etcd://...). Nothing
is held until every host joined, within the step's gather (default 5m). Then
each host holds its own containers, the first to join runs the step once, and
each closes on the step's end and exits with its result. A host that cannot
learn the end of a started step keeps its hold.

Exit 0 if the step succeeded and every container runs again; else 1, or 130
when interrupted. With -q nothing is printed on success; on failure the step's
output (its last 256 KiB) and what failed.

Before anything is stopped, the window checks that the step can run: an exec:
program that is missing or not executable is refused (exit 2), a run: image
not in the engine is pulled, and one that cannot be had fails the window
(exit 1). The window closes when the step exits, whatever children it left
holding its output; a closed stderr does not stop it.

--dry-run shows what the window would hold and how (stopped or changed; for
mesh: all, the hosts that must join), what it would run (image, command,
volumes-from), its timeout, and what each check of the open finds. It changes
nothing: it takes no lock a real command waits for, pulls nothing (an absent
image reads "image absent: would pull"), and heals and releases nothing. It
exits as a real run would now, except that a live apply or, with --wait, an
open window it would wait for reads 0.`,
		Example: `  # crontab: the step comes from the last apply, -q mails only failures
  30 3 * * * meshctl -q window run store garbage-collect
  meshctl window run store garbage-collect -f mesh.yaml --timeout 2h
  meshctl window run store garbage-collect --wait 10m   # wait for another window on store
  meshctl window run store garbage-collect --dry-run    # what it would hold, run and check`,
		Annotations: map[string]string{exitStatusKey: `  0    the step succeeded and every held container runs again
  1    the step failed or timed out, its image cannot be had, a held
       container could not be brought back (its hold stays for the next
       apply), or etcd did not answer for a max-unavailable slot (nothing held);
       for mesh: all, a host missing at the deadline or lost before the
       start (nothing runs), the step failed on its runner, or its end is
       not known (the hold stays)
  2    bad usage, an unknown module or step, an exec: program that is
       missing, max-unavailable or mesh: all without an etcd ledger, hosts
       whose step definitions differ
  3    another window on the module is open (after --wait), the state
       lock was not had within --lock-timeout, the module's slot of its
       max-unavailable was not had within --lock-timeout (holders named),
       or a mesh window's gathering refused the join (too late, started)
  130  interrupted (SIGINT, SIGTERM): the window closed first
  --dry-run exits as the run would now: 0 also where it would wait`},
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.module, opts.step = args[0], args[1]
			if opts.timeout < 0 || opts.wait < 0 || opts.settle < 0 {
				return &UsageError{Err: fmt.Errorf("--timeout, --wait and --settle must not be negative"), Cmd: cmd.CommandPath()}
			}
			if opts.dryRun {
				return runWindowDryRun(cmd.Context(), env, opts)
			}
			return runWindowRun(cmd.Context(), env, opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.file, "file", "f", "", "mesh file to take the step from (default: the last applied one)")
	f.DurationVar(&opts.timeout, "timeout", 0, "kill the step past this (default: the step's timeout, else 1h)")
	f.DurationVar(&opts.wait, "wait", 0, "wait this long for another window on the module to close (default: exit 3 at once)")
	f.BoolVar(&opts.dryRun, "dry-run", false, "show what the window would hold, run and check, and change nothing")
	f.DurationVar(&opts.settle, "settle", lifecycle.DefaultSettle, "how long a held container without a healthcheck must keep running once started again, to count as back")
	return writesMetrics(cmd)
}

// keptOutput is how much of the step's output -q keeps for a failure report.
const keptOutput = 256 << 10

// mesh loads the file --file names, or nil without one: the step then
// comes from the applied record.
func (opts *windowRunOptions) mesh(ctx context.Context, env *Env) (*mesh.File, error) {
	if opts.file == "" {
		return nil, nil
	}
	return loadMesh(ctx, opts.file, env.Stdin)
}

func runWindowRun(ctx context.Context, env *Env, opts *windowRunOptions) error {
	file, err := opts.mesh(ctx, env)
	if err != nil {
		return err
	}
	dir, eng, err := env.StateAndEngine()
	if err != nil {
		return err
	}
	defer eng.Close()

	// Under -q the step's output is kept, and shown only if the window
	// fails. Only its tail is kept, for a step of hours may say a lot.
	var stepOut io.Writer = env.Stderr
	kept := window.NewTail(keptOutput)
	if env.Global.Quiet {
		stepOut = kept
	}
	// With an etcd ledger the mesh sees this window once it holds the
	// module, while its process lives.
	endPublication := func() {}
	// The etcd ledger is also where the hosts of a mesh window meet.
	budget, m, closeBudget, err := meshAndBudget(env, dir)
	if err != nil {
		return err
	}
	defer closeBudget()
	entry, err := window.Run(ctx, dir, eng, window.Options{
		Budget:     budget,
		Gather:     m.Gather,
		Host:       m.Host,
		Opened:     func() { endPublication = publishWindow(ctx, env, dir, opts.module, opts.step) },
		Module:     opts.module,
		Step:       opts.step,
		File:       file,
		Timeout:    opts.timeout,
		Wait:       opts.wait,
		Lock:       env.LockOptions("state lock"),
		Now:        env.Now,
		Progress:   env.Progressf,
		Status:     env.StatusFunc(),
		StepOutput: env.Progress().Output(stepOut),
		Settle:     opts.settle,
	})
	endPublication()
	if out, cut := kept.Bytes(); err != nil && len(out) > 0 {
		if cut {
			fmt.Fprintf(env.Stderr, "(output truncated: last %d KiB shown)\n", keptOutput>>10)
		}
		env.Stderr.Write(out)
		if out[len(out)-1] != '\n' {
			fmt.Fprintln(env.Stderr) // the error below starts a line of its own
		}
	}
	if entry != nil && env.JSON() {
		if perr := env.PrintJSON(entry); perr != nil {
			return perr
		}
	}
	return err
}
