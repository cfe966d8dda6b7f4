package cli

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/meshctl/meshctl/pkg/status"
	"github.com/spf13/cobra"
)

func init() { register(newStatusCmd) }

func newStatusCmd(env *Env) *cobra.Command {
	var meshView bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what runs, what is held and why, builds and the last apply",
		Long: `Show each managed container's state (running, stopped, held by a window,
missing, drifted from the last applied spec), the windows not yet closed, each
module's current build, and the last apply's time and result.

A host with a window open reads as working: its held containers are stopped on
purpose and come back when the window closes.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if meshView {
				return runMeshView(cmd.Context(), env)
			}
			return runStatus(cmd.Context(), env)
		},
	}
	cmd.Flags().BoolVar(&meshView, "mesh", false, "every host's open windows and the current builds, from the etcd ledger")
	return cmd
}

func runStatus(ctx context.Context, env *Env) error {
	// Status changes nothing: not even a missing state directory is made.
	dir, eng, err := env.OpenStateAndEngine(true)
	if err != nil {
		return err
	}
	defer eng.Close()
	rep, err := status.Get(ctx, dir, eng, env.Now())
	if err != nil {
		return err
	}
	if env.JSON() {
		return env.PrintJSON(rep)
	}
	if env.Global.Quiet {
		return nil
	}
	out := env.Stdout
	fmt.Fprintln(out, rep.Summary)
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONTAINER\tSTATE\tDETAIL")
	for _, c := range rep.Containers {
		detail := strings.Join(c.Reasons, ", ")
		if detail == "" {
			detail = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.State, detail)
	}
	tw.Flush()
	for _, w := range rep.Windows {
		fmt.Fprintln(out, w.Describe())
	}
	for _, b := range rep.Builds {
		fmt.Fprintf(out, "build %s: %s %s\n", b.Module, b.ID, b.Image)
	}
	if l := rep.LastApply; l != nil {
		fmt.Fprintf(out, "last apply: %s, %s (%s)\n", l.FinishedAt.Local().Format("2006-01-02 15:04:05"), l.Result, l.Source)
	} else {
		fmt.Fprintln(out, "last apply: never")
	}
	return nil
}
