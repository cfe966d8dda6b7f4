// Package cli wires meshctl's commands: flags, configuration, output and exit
// status. The work itself is done by the domain packages (apply, window,
// ledger), which know nothing of cobra.
//
// The files: root.go (the root command, which lists every command
// explicitly, and the global flags); one file per command (apply.go,
// status.go, convert.go, version.go, window_*.go, build_*.go), each with
// its help, EXIT STATUS and examples; env.go (the globals and the Env a
// command runs in) and config.go (MESHCTL_* variables and the config file,
// the only file that knows viper); exit.go (the one switch from an error's
// kind to the exit status, exitCode) and jsonout.go (the JSON document of
// a command); help.go (help topics and the usage template); ledger.go (the
// one choice of ledger store, openLedgerStore) and mesh.go (the etcd mesh
// view); progress.go, interrupt.go, metrics.go, complete.go and helper.go
// (progress lines, signals, the metrics file, shell completion, helper
// programs such as meshctl-convert).
package cli
