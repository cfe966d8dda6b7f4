package cli

import (
	"context"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/spf13/cobra"
)

func newWindowAckCmd(env *Env) *cobra.Command {
	return writesMetrics(&cobra.Command{
		Use:   "ack [ID...]",
		Short: "Acknowledge failed windows, so that status --check no longer reports them",
		Long: `Acknowledge failed windows: a person has seen the failure (meshctl window
logs ID) and dealt with it. An acknowledged window stays in the history and in
window list, but is no longer a problem for status --check, nor a failed window
in status, until that step fails again. Without ID, the last window of every
step that failed.

status --check also forgets, without an acknowledgement, the windows of a step
that the applied mesh file no longer has.

-o json prints {"acked":[{"id","module","step","result","acked_at",…}]}.`,
		Example: `  meshctl status --check                    # window w-… store/garbage-collect ended failed …
  meshctl window logs w-20261201T033002-1a2b3c
  meshctl window ack w-20261201T033002-1a2b3c
  meshctl window ack                        # every step's last failed window`,
		Annotations: map[string]string{exitStatusKey: `  0    acknowledged (or nothing failed)
  2    an unknown window id, a window that ended ok, a state file that
       cannot be read
  3    busy: the state lock was not had within --lock-timeout`},
		Args: usageArgs(cobra.ArbitraryArgs),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runWindowAck(cmd.Context(), env, args)
		},
	})
}

type windowAckJSON struct {
	Acked []coord.Entry `json:"acked"`
}

func runWindowAck(ctx context.Context, env *Env, ids []string) error {
	dir, err := env.State()
	if err != nil {
		return err
	}
	acked, err := window.Ack(ctx, dir, env.LockOptions("state lock"), ids, env.Now())
	if err != nil {
		return err
	}
	if env.JSON() {
		if acked == nil {
			acked = []coord.Entry{}
		}
		return env.PrintJSON(windowAckJSON{Acked: acked})
	}
	if len(acked) == 0 {
		env.Printf("no failed window to acknowledge\n")
	}
	for _, e := range acked {
		env.Printf("acknowledged window %s %s/%s (%s at %s)\n", e.ID, e.Module, e.Step, e.Result, state.When(e.ClosedAt))
	}
	return nil
}
