package cli

import (
	"context"

	"github.com/spf13/cobra"
)

type buildPlanOptions struct {
	id string
}

func newBuildPlanCmd(env *Env) *cobra.Command {
	opts := &buildPlanOptions{}
	cmd := &cobra.Command{
		Use:   "plan ID",
		Short: "Show a plan: its builds and whether it is settled",
		Long: `Show a plan: whether it is settled, then a line "MODULE ID STATE" per build.

A plan is settled once every build it asked for is recorded, whatever the
outcome; only its own builds settle it, never those of another plan for the
same modules. The first line reads "ID settled" or "ID pending". An unknown
plan exits 2.`,
		Example: `  meshctl build plan p-01JNQX6Z2V8W9X0Y1Z2A3B4C5D
  until meshctl build plan "$plan" | grep -q ' settled$'; do sleep 10; done`,
		Annotations: map[string]string{exitStatusKey: `  0    shown, settled or not
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, an unknown plan`},
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.id = args[0]
			return runBuildPlan(cmd.Context(), env, opts)
		},
	}
	return cmd
}

type buildPlanJSON struct {
	ID      string               `json:"id"`
	Settled bool                 `json:"settled"`
	Builds  []buildPlanBuildJSON `json:"builds"`
}

type buildPlanBuildJSON struct {
	ID     string `json:"id"`
	Module string `json:"module"`
	State  string `json:"state"`
}

func runBuildPlan(ctx context.Context, env *Env, opts *buildPlanOptions) error {
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	p, err := l.Plan(ctx, opts.id)
	if err != nil {
		return err
	}
	if env.JSON() {
		out := buildPlanJSON{ID: p.ID, Settled: p.Settled}
		for _, b := range p.Builds {
			out.Builds = append(out.Builds, buildPlanBuildJSON{ID: b.ID, Module: b.Module, State: string(b.State)})
		}
		return env.PrintJSON(out)
	}
	settled := "pending"
	if p.Settled {
		settled = "settled"
	}
	env.Printf("%s %s\n", p.ID, settled)
	for _, b := range p.Builds {
		env.Printf("%s %s %s\n", b.Module, b.ID, b.State)
	}
	return nil
}
