// Package cli wires meshctl's commands, with their flags, configuration,
// output and exit status. The domain packages do the work. They are
// apply, window and ledger, and they know nothing of cobra.
//
// root.go has the root command, which lists every command explicitly, and
// the global flags. Each command has one file, such as apply.go, status.go,
// convert.go, version.go, window_*.go and build_*.go. Each such file has
// the command's help, EXIT STATUS and examples. env.go has the globals and
// the Env a command runs in. config.go reads MESHCTL_* variables and the
// config file, and is the only file that knows viper. exit.go has the one
// switch from an error's kind to the exit status, exitCode. jsonout.go
// writes the JSON document of a command. help.go has the help topics and
// the usage template. ledger.go makes the one choice of ledger store,
// openLedgerStore. mesh.go has the etcd mesh view. progress.go,
// interrupt.go, metrics.go, complete.go and helper.go deal with progress
// lines, signals, the metrics file, shell completion and helper programs
// such as meshctl-convert.
package cli
