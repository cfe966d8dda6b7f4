package cli

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/spf13/cobra"
)

type buildRequestOptions struct {
	modules []string
	plan    string
	// isNew says a module unknown to the ledger and this host is meant,
	// however close its name is to one that is known.
	isNew bool
}

func newBuildRequestCmd(env *Env) *cobra.Command {
	opts := &buildRequestOptions{}
	cmd := &cobra.Command{
		Use:   "request MODULE... [--plan ID]",
		Short: "Issue a build id per module, before building",
		Long: `Issue one build id per module, in the order given, before the builds start.

The modules of one call form a plan. It prints the plan id, then a line
"MODULE ID" per build:

  p-01JNQX6Z2V8W9X0Y1Z2A3B4C5D
  store b-01JNQX6Z2V8W9X0Y1Z2A3B4C5E

With -q it prints only the build ids, one a line in the order given (as
"docker run -d" prints only the id): BUILD=$(meshctl -q build request web).

--plan ID adds the builds to a plan that an earlier request opened (an
unknown plan exits 2), for a pipeline that asks for its builds in steps; the
plan is settled again only once they too are recorded.

Ids are strictly increasing in request order across processes: it is the
order of requests, not of records, that decides which build is current.

A module that neither the ledger nor this host's applied state knows, and
whose name is a slip of the fingers from one they know (two letters swapped,
one doubled or dropped: "wbe" beside "web"), is taken for a typo: refused
(exit 2) with a "did you mean", nothing issued. --new says the module is new:
its first build.`,
		Example: `  meshctl build request web
  meshctl build request web store -o json          # one plan, a build id per module
  meshctl build request api --plan p-01JNQX6Z2V8W9X0Y1Z2A3B4C5D
  meshctl build request webb --new                 # a new module, one letter from "web"`,
		Annotations: map[string]string{exitStatusKey: `  0    issued
  1    the etcd ledger (--ledger etcd://…) did not answer
  2    bad usage, a bad module name, an unknown plan, a module name that
       looks like a typo of a known one (without --new)
  3    the ledger lock was not had within --lock-timeout`},
		Args: usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.modules = args
			return runBuildRequest(cmd.Context(), env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.plan, "plan", "", "add the builds to this existing plan (p-…)")
	cmd.Flags().BoolVar(&opts.isNew, "new", false, "a module new to the ledger is meant, even one that looks like a typo of a known one")
	return writesMetrics(cmd)
}

type buildRequestJSON struct {
	Plan   string                  `json:"plan"`
	Builds []buildRequestBuildJSON `json:"builds"`
}

type buildRequestBuildJSON struct {
	ID          string    `json:"id"`
	Module      string    `json:"module"`
	RequestedAt time.Time `json:"requested_at"`
}

func runBuildRequest(ctx context.Context, env *Env, opts *buildRequestOptions) error {
	l, err := openLedger(env)
	if err != nil {
		return err
	}
	if !opts.isNew {
		if err := checkTypos(ctx, env, l, opts.modules); err != nil {
			return err
		}
	}
	p, err := l.Request(ctx, opts.modules, opts.plan)
	if err != nil {
		return err
	}
	if env.JSON() {
		out := buildRequestJSON{Plan: p.ID}
		for _, b := range p.Builds {
			out.Builds = append(out.Builds, buildRequestBuildJSON{ID: b.ID, Module: b.Module, RequestedAt: b.RequestedAt.UTC()})
		}
		return env.PrintJSON(out)
	}
	if env.Global.Quiet {
		// Only what a script needs, as `docker run -d` prints only the id.
		// A script runs BUILD=$(meshctl -q build request web).
		for _, b := range p.Builds {
			fmt.Fprintln(env.Stdout, b.ID)
		}
		return nil
	}
	env.Printf("%s\n", p.ID)
	for _, b := range p.Builds {
		env.Printf("%s %s\n", b.Module, b.ID)
	}
	return nil
}

// checkTypos refuses a requested module that is likely a typo. Such a
// module is unknown to the ledger and to this host's applied state. It is
// also a slip of the fingers from a module that is known (mesh.Near). Any
// other module is simply new.
func checkTypos(ctx context.Context, env *Env, l *ledger.Ledger, modules []string) error {
	known, err := l.Modules(ctx)
	if err != nil {
		return err
	}
	if d, err := env.StateReadOnly(); err == nil && d.Exists() {
		if a, ok, err := record.LoadApplied(d); err == nil && ok && a.File != nil {
			known = append(known, a.File.ModuleNames()...)
		}
	}
	for _, m := range modules {
		if slices.Contains(known, m) || ledger.CheckModule(m) != nil {
			continue // a bad name is the request's to refuse, as such
		}
		if near := mesh.Near(m, known); near != "" {
			return &UsageError{Err: fmt.Errorf("module %q is new to the ledger and looks like a typo of %q: did you mean %q? (for a new module, give --new)", m, near, near)}
		}
	}
	return nil
}
