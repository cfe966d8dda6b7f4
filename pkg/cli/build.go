package cli

import (
	"time"

	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/spf13/cobra"
)

func newBuildCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "build",
		Short: "Keep the ledger of image builds: the current artifact follows request order",
		Long: `Keep the ledger of image builds per module, so that which build is a module's
current artifact follows when it was requested, not which builder was slowest.

A builder asks for a build id before it starts (build request) and records
the result when it is done (build record). A module's current artifact is
replaced only by a successful build requested at or after the one it came
from: a build that was requested earlier but finishes later is recorded as
superseded and changes nothing. Ids are strictly increasing in request order
across processes, even within one millisecond or when the clock steps back.

Rolling back on purpose is a new request recorded with the old image:

  id=$(meshctl build request store | sed -n 2p | cut -d' ' -f2)
  meshctl build record "$id" --image registry.example/store@sha256:OLD…

'apply' runs 'artifact: MODULE' containers with the module's current image
(build current MODULE).

The ledger keeps every pending build, each module's current build, and the
last 200 recorded builds of each module in full; older ones leave a compact
record, so a retried or late record of them is still judged correctly.`,
		Example: `  id=$(meshctl build request store | awk '$1 == "store" {print $2}')
  meshctl build record "$id" --image registry.example/store@sha256:…
  meshctl build current store`,
		Annotations: map[string]string{exitStatusKey: `  2    no subcommand (its subcommands are listed on stderr), or an unknown
       one; see each subcommand`},
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(
		newBuildRequestCmd(env),
		newBuildRecordCmd(env),
		newBuildCurrentCmd(env),
		newBuildListCmd(env),
		newBuildPlanCmd(env),
		newBuildExportCmd(env),
		newBuildImportCmd(env),
	)
	return cmd
}

// openLedger opens the configured ledger (--ledger) for a build command,
// with the Env's clock. That is the state directory's files, locked within
// --lock-timeout, or etcd.
func openLedger(env *Env) (*ledger.Ledger, error) {
	cfg, err := env.etcdLedger()
	if err != nil {
		return nil, err
	}
	l, err := openLedgerStore(cfg, env.State)
	if err != nil {
		return nil, err
	}
	l.Now = env.Now
	l.LockTimeout = env.Global.LockTimeout // the file store's lock; etcd has cfg.Timeout
	return l, nil
}

// jsonTime is a time for -o json. It is RFC 3339 in UTC, or null when unset.
func jsonTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// textTime is a time for a text table as state.When gives it, or "-" when
// unset.
func textTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return state.When(t)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
