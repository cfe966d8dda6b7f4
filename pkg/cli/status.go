package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/status"
	"github.com/spf13/cobra"
)

func newStatusCmd(env *Env) *cobra.Command {
	var meshView, check bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what runs, what is held and why, builds and the last apply",
		Long: `Show each managed container's state (running, restarting, stopped, held by
a window, missing, drifted from the last applied spec), the windows not yet
closed, each module's current build, and the last apply's time and result. A
container the engine restarted reads restarting until it has run for 3s.

A host with a window open reads as working: its held containers are stopped on
purpose and come back when the window closes. So does a host an apply is
deploying to: the containers it is changing read changing until its claim's
deadline (stop grace, health gate and drain of each). A window's line says how
long it has been open, its deadline and its step's last line (-o json:
elapsed, last_line, last_line_at, as window list's).

--check is for monitoring (Nagios-style checks, cron mail): it prints one line
per problem that needs a person, and exits 1 if there is any, else prints "ok"
and exits 0. A problem is a failed last apply, a window whose last run did not
end ok, a stale hold, an overdue window, a running step that has printed
nothing for its stall-after (naming the window and when it last printed), an
apply's claim past its deadline, or a container drifted, missing, stopped or restarting that no window holds and no
live apply is changing. So is a dead mesh window's hold that stays: on a member
it names the host its step runs on and what to run there; on that host, the
step container that still runs. Only such a hold makes status ask etcd. So is a container a recreate left under a temporary
name (NAME.meshctl-new, -old or -retiring), running or not.`,
		Example: `  meshctl status
  meshctl status -o json | jq '.containers[] | select(.state != "running")'
  */5 * * * * meshctl status --check -q          # cron mails only problems
  meshctl status --check || page-oncall          # a Nagios-style check`,
		Annotations: map[string]string{exitStatusKey: `  0    shown, whatever the containers' states (--check: no problem)
  1    the engine is unreachable; --check: a problem needs a person (one
       line each on stdout)
  2    bad usage, a state file that cannot be read`},
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if meshView {
				return runMeshView(cmd.Context(), env)
			}
			return runStatus(cmd.Context(), env, check)
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "print one line per problem that needs a person; exit 1 if any")
	cmd.Flags().BoolVar(&meshView, "mesh", false, "every host's open windows and the current builds, from the etcd ledger")
	return writesMetrics(cmd)
}

// meshHolds is what a dead mesh window's hold is classified with. With a
// file ledger such a hold stays unknown. The etcd client dials only when
// such a hold is asked about.
func meshHolds(env *Env) (coord.Mesh, func(), error) {
	m, l, err := openMesh(env)
	if err != nil || l == nil {
		return m, func() {}, err
	}
	return m, func() { l.Close() }, nil
}

// openMesh opens the etcd ledger --ledger names, as this host's side of
// the mesh. With a file ledger it returns a Mesh without Gather, and no
// ledger. The client dials on its first call.
func openMesh(env *Env) (coord.Mesh, *ledger.Ledger, error) {
	m := coord.Mesh{Host: env.hostName()}
	cfg, err := env.etcdLedger()
	if err != nil || cfg == nil {
		return m, nil, err
	}
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		return m, nil, err
	}
	m.Gather = l
	return m, l, nil
}

// problemsError is a status --check that found n problems (exit 1).
func problemsError(n int) error {
	if n == 1 {
		return fault.New(fault.Failed, "1 problem needs a person")
	}
	return fault.New(fault.Failed, "%d problems need a person", n)
}

func runStatus(ctx context.Context, env *Env, check bool) error {
	// Status changes nothing. Not even a missing state directory is made.
	dir, eng, err := env.StateReadOnlyAndEngine()
	if err != nil {
		return err
	}
	defer eng.Close()
	m, closeMesh, err := meshHolds(env)
	if err != nil {
		return err
	}
	defer closeMesh()
	rep, err := status.Get(ctx, dir, eng, env.Now(), currentBuilds(ctx, env, dir), m)
	if err != nil {
		return err
	}
	var problems error
	if check && len(rep.Problems) > 0 {
		problems = problemsError(len(rep.Problems))
	}
	if env.JSON() {
		if err := env.PrintJSON(rep); err != nil {
			return err
		}
		return problems
	}
	if check {
		// One line per problem, even under -q, since that is what the check is for.
		for _, p := range rep.Problems {
			fmt.Fprintln(env.Stdout, p)
		}
		if problems == nil {
			env.Printf("ok\n")
		}
		return problems
	}
	if env.Global.Quiet {
		return nil
	}
	out := env.Stdout
	fmt.Fprintln(out, rep.Summary)
	tw := newTable(out)
	fmt.Fprintln(tw, "CONTAINER\tSTATE\tDETAIL")
	for _, c := range rep.Containers {
		detail := strings.Join(c.Reasons, ", ")
		if c.Health != "" {
			detail = strings.TrimPrefix(detail+", "+c.Health, ", ")
		}
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.State, detail)
	}
	tw.Flush()
	for _, w := range rep.Windows {
		// OpenView's Describe, with the step's progress.
		line := w.Describe()
		if todo := w.ToDo(); todo != "" {
			line += "; " + todo
		}
		fmt.Fprintln(out, line)
	}
	for _, b := range rep.Builds {
		fmt.Fprintf(out, "build %s: %s %s\n", b.Module, b.ID, b.Image)
	}
	for _, e := range rep.FailedWindows {
		fmt.Fprintf(out, "last window %s %s/%s: %s at %s\n", e.ID, e.Module, e.Step, e.Result, state.When(e.ClosedAt))
	}
	if l := rep.LastApply; l != nil {
		fmt.Fprintf(out, "last apply: %s, %s (%s)\n", state.When(l.FinishedAt), l.Result, l.Source)
	} else {
		fmt.Fprintln(out, "last apply: never")
	}
	return nil
}
