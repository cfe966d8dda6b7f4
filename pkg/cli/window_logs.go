package cli

import (
	"context"
	"fmt"

	"github.com/meshctl/meshctl/pkg/window"
	"github.com/spf13/cobra"
)

func newWindowLogsCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "logs [ID]",
		Short: "Print the kept output of a window's step",
		Long: fmt.Sprintf(`Print the output of a window's step, as kept in the state directory beside the
history: its last %d KiB, for each window the history holds. Without ID, the
last window that closed.

-o json prints {"id","module","step","truncated","output"}.`, window.LogLimit>>10),
		Example: `  meshctl window logs                       # the last window's step output
  meshctl window logs w-20261201T033002-1a2b3c
  meshctl window logs -o json | jq -r .output`,
		Annotations: map[string]string{exitStatusKey: `  0    printed
  2    an unknown window id, a window that kept no log (its step did not run),
       no window closed yet, a state file that cannot be read`},
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return runWindowLogs(cmd.Context(), env, id)
		},
	}
	return cmd
}

type windowLogJSON struct {
	ID        string `json:"id"`
	Module    string `json:"module"`
	Step      string `json:"step"`
	Truncated bool   `json:"truncated"`
	Output    string `json:"output"`
}

func runWindowLogs(_ context.Context, env *Env, id string) error {
	// Reading a log changes nothing. Not even a missing state directory is made.
	dir, err := env.StateReadOnly()
	if err != nil {
		return err
	}
	l, err := window.ReadLog(dir, id)
	if err != nil {
		return err
	}
	if env.JSON() {
		return env.PrintJSON(windowLogJSON{ID: l.ID, Module: l.Module, Step: l.Step, Truncated: l.Truncated, Output: l.Output})
	}
	if l.Truncated {
		fmt.Fprintf(env.Stderr, "(window %s: output truncated, its last %d KiB follow)\n", l.ID, window.LogLimit>>10)
	}
	fmt.Fprint(env.Stdout, l.Output)
	return nil
}
