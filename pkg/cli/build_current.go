package cli

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/ledger"

	"github.com/spf13/cobra"
)

type buildCurrentOptions struct {
	module string
}

func newBuildCurrentCmd(env *Env) *cobra.Command {
	opts := &buildCurrentOptions{}
	cmd := &cobra.Command{
		Use:   "current MODULE",
		Short: "Print the image of a module's current build",
		Long: `Print the image reference of a module's current build: the one that
'artifact: MODULE' in a mesh file resolves to. A module with no current build
exits 2.`,
		Example: `  meshctl build current web
  meshctl build current web -o json`,
		Annotations: map[string]string{exitStatusKey: `  0    printed
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, a bad module name, a module with no current build`},
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.module = args[0]
			return runBuildCurrent(cmd.Context(), env, opts)
		},
	}
	return cmd
}

type buildCurrentJSON struct {
	Module      string    `json:"module"`
	ID          string    `json:"id"`
	Image       string    `json:"image"`
	RequestedAt time.Time `json:"requested_at"`
	FinishedAt  time.Time `json:"finished_at"`
}

func runBuildCurrent(ctx context.Context, env *Env, opts *buildCurrentOptions) error {
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	b, ok, err := l.CurrentBuild(ctx, opts.module)
	if err != nil {
		return err
	}
	if !ok {
		return &ledger.NoCurrentError{Module: opts.module}
	}
	if env.JSON() {
		return env.PrintJSON(buildCurrentJSON{Module: b.Module, ID: b.ID, Image: b.Image,
			RequestedAt: b.RequestedAt.UTC(), FinishedAt: b.FinishedAt.UTC()})
	}
	env.Printf("%s\n", b.Image)
	return nil
}
