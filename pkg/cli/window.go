package cli

import "github.com/spf13/cobra"

func newWindowCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "window",
		Short: "Hold containers stopped or changed while a maintenance step runs",
		Example: `  meshctl window run store garbage-collect
  meshctl window list`,
		Annotations: map[string]string{exitStatusKey: `  2    no subcommand (its subcommands are listed on stderr), or an unknown
       one; see each subcommand`},
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newWindowRunCmd(env), newWindowListCmd(env), newWindowLogsCmd(env), newWindowAckCmd(env))
	return cmd
}
