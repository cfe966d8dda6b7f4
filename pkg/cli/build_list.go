package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
)

type buildListOptions struct {
	module string
}

func newBuildListCmd(env *Env) *cobra.Command {
	opts := &buildListOptions{}
	cmd := &cobra.Command{
		Use:   "list [MODULE]",
		Short: "List the builds of the ledger, in request order",
		Long: `List the builds of one module, or of all, in request order.

States: pending (requested, not recorded); current (the module's current
artifact); superseded (recorded with an image, and a build requested later is
current; so a formerly current build reads superseded once a later one is);
failed.

The ledger lists every pending build and, per module, the current build and
the last 200 or more recorded ones; older builds keep only a compact record
and are not listed.`,
		Example: `  meshctl build list
  meshctl build list web -o json | jq -r '.builds[] | select(.state == "pending") | .id'`,
		Annotations: map[string]string{exitStatusKey: `  0    listed
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, a bad module name, a ledger file that cannot be read`},
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.module = args[0]
			}
			return runBuildList(cmd.Context(), env, opts)
		},
	}
	return cmd
}

type buildListJSON struct {
	Builds []buildListBuildJSON `json:"builds"`
}

type buildListBuildJSON struct {
	ID          string     `json:"id"`
	Module      string     `json:"module"`
	Plan        string     `json:"plan"`
	State       string     `json:"state"`
	Image       *string    `json:"image"`
	RequestedAt time.Time  `json:"requested_at"`
	FinishedAt  *time.Time `json:"finished_at"`
}

func runBuildList(ctx context.Context, env *Env, opts *buildListOptions) error {
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	builds, err := l.List(ctx, opts.module)
	if err != nil {
		return err
	}
	if env.JSON() {
		out := buildListJSON{}
		for _, b := range builds {
			j := buildListBuildJSON{ID: b.ID, Module: b.Module, Plan: b.Plan, State: string(b.State),
				RequestedAt: b.RequestedAt.UTC(), FinishedAt: jsonTime(b.FinishedAt)}
			if b.Image != "" {
				img := b.Image
				j.Image = &img
			}
			out.Builds = append(out.Builds, j)
		}
		return env.PrintJSON(out)
	}
	if env.Global.Quiet {
		return nil
	}
	tw := newTable(env.Stdout)
	fmt.Fprintln(tw, "ID\tMODULE\tSTATE\tIMAGE\tREQUESTED\tFINISHED\tPLAN")
	for _, b := range builds {
		image := orDash(b.Image)
		if b.Reason != "" {
			image = "(" + b.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ID, b.Module, b.State, image,
			textTime(b.RequestedAt), textTime(b.FinishedAt), b.Plan)
	}
	return tw.Flush()
}
