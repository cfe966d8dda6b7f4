package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/spf13/cobra"
)

type windowListOptions struct {
	history int
	mesh    bool
	steps   bool
}

func newWindowListCmd(env *Env) *cobra.Command {
	opts := &windowListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show windows not yet closed and recent history",
		Long: `Show the windows not yet closed and the recent history.

States: open; overdue (alive past its deadline: still honoured); orphaned (its
process is gone but its step container, or a process of its exec: step, still
runs: still honoured); unknown
(its process is gone and the engine cannot say whether its step container runs:
still honoured, fail closed); stale (its
process is gone and no step container runs: the next apply or window releases
it, bringing its containers back as the close would).

Each window not yet closed shows how long it has been open (ELAPSED), its
deadline, and its step's last line with when it printed it (LAST LINE: control
characters escaped, at most 200 characters), from the live log the running
window writes at most once a second; -o json gives them as elapsed, last_line
("" before any) and last_line_at (null before any). meshctl window logs
--follow ID follows the step's output to the close.

With none open, the text says "no window open". A failed window someone
acknowledged (meshctl window ack) reads "failed (acknowledged)"; -o json
gives it acked_at.

--steps lists instead every module's steps in the last applied desired state:
each with the containers it holds and how (stopped), its timeout, and where
it holds (host, or all with its gather: a mesh window).`,
		Example: `  meshctl window list
  meshctl window list --history 0                  # only windows not yet closed
  meshctl window list -o json | jq '.windows[] | select(.state == "stale")'
  meshctl window list --steps                      # every step a window can run`,
		Annotations: map[string]string{exitStatusKey: `  0    listed
  1    the engine is unreachable (a window's liveness needs it)
  2    bad usage, a state file that cannot be read`},
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.history < 0 {
				return &UsageError{Err: fmt.Errorf("--history must be 0 or more, not %d", opts.history), Cmd: cmd.CommandPath()}
			}
			if opts.mesh {
				return runMeshView(cmd.Context(), env)
			}
			if opts.steps {
				return runWindowSteps(env)
			}
			return runWindowList(cmd.Context(), env, opts)
		},
	}
	cmd.Flags().IntVar(&opts.history, "history", 20, "how many closed windows to show (0: none)")
	cmd.Flags().BoolVar(&opts.mesh, "mesh", false, "every host's open windows and the current builds, from the etcd ledger")
	cmd.Flags().BoolVar(&opts.steps, "steps", false, "every module's steps in the last applied state, with what each holds and its timeout")
	cmd.MarkFlagsMutuallyExclusive("mesh", "steps")
	return cmd
}

type windowListJSON struct {
	Windows []window.OpenView `json:"windows"`
	History []coord.Entry     `json:"history"`
}

func runWindowList(ctx context.Context, env *Env, opts *windowListOptions) error {
	dir, err := env.State()
	if err != nil {
		return err
	}
	m, closeMesh, err := meshHolds(env)
	if err != nil {
		return err
	}
	defer closeMesh()
	views, hist, err := window.List(ctx, dir, env.Engine, env.Now(), m, env.Warnf)
	if err != nil {
		return err
	}
	if n := len(hist) - opts.history; n > 0 {
		hist = hist[n:]
	}
	if env.JSON() {
		return env.PrintJSON(windowListJSON{Windows: views, History: hist})
	}
	if env.Global.Quiet {
		return nil
	}
	if err := printOpenWindows(env, views); err != nil || len(hist) == 0 {
		return err
	}
	// Closed windows, newest last, in a table of their own.
	fmt.Fprintln(env.Stdout)
	tw := newTable(env.Stdout)
	fmt.Fprintln(tw, "CLOSED WINDOW\tMODULE/STEP\tRESULT\tEXIT\tOPENED\tCLOSED")
	for _, e := range hist {
		code := "-"
		if e.StepExitCode != nil {
			code = fmt.Sprint(*e.StepExitCode)
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.ID, e.Module, e.Step, resultText(e), code,
			state.When(e.OpenedAt), state.When(e.ClosedAt))
	}
	return tw.Flush()
}

// printOpenWindows is the table of windows not yet closed. With none, it
// says so in a line rather than printing a bare header.
func printOpenWindows(env *Env, views []window.OpenView) error {
	if len(views) == 0 {
		_, err := fmt.Fprintln(env.Stdout, "no window open")
		return err
	}
	tw := newTable(env.Stdout)
	fmt.Fprintln(tw, "WINDOW\tMODULE/STEP\tSTATE\tPID\tOPENED\tELAPSED\tDEADLINE\tHOLDS\tLAST LINE")
	for _, v := range views {
		last := "-"
		if v.LastLineAt != nil {
			last = state.When(*v.LastLineAt) + " " + v.LastLine
		}
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Module, v.Step, v.State, v.PID,
			state.When(v.OpenedAt), v.Elapsed, state.When(v.Deadline), strings.Join(v.HeldNames(), ","), last)
	}
	return tw.Flush()
}

// resultText is how a closed window ended, for text output. A failure
// someone acknowledged says so, since it needs nobody any more.
func resultText(e coord.Entry) string {
	if e.Failed() && e.AckedAt != nil {
		return e.Result + " (acknowledged)"
	}
	return e.Result
}
