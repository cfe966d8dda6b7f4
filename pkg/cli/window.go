package cli

import "github.com/spf13/cobra"

func init() { register(newWindowCmd) }

func newWindowCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "window",
		Short: "Hold containers stopped while a maintenance step runs",
		Args:  usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newWindowRunCmd(env), newWindowListCmd(env), newWindowLogsCmd(env), newWindowAckCmd(env))
	return cmd
}
