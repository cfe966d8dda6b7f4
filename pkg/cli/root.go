package cli

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newRootCmd(env *Env) *cobra.Command {
	g := &env.Global
	root := &cobra.Command{
		Use:   "meshctl",
		Short: "Run the containers of one host of a mesh",
		Long: `meshctl runs the containers of one host of a mesh.

Its one-shot commands coordinate only through locked JSON files in a state
directory:
  apply        converge the host's containers to a mesh file (CI, on every merge)
  window run   hold containers stopped or changed while a maintenance step runs (cron)
  build        a ledger of builds: the current artifact follows request order
  status       what runs, what is held and why, each module's current build
  convert      print a Compose project as a mesh module, to move from Compose
  mesh         the mesh's records in etcd: who runs a module, max-unavailable slots

With an etcd ledger the hosts of a mesh share more: max-unavailable bounds how
many hosts have a module down at once, and a step with mesh: all holds the
module on every host that runs it while the step runs once.

Global flags may also be set as MESHCTL_<NAME> variables (MESHCTL_STATE_DIR,
MESHCTL_LOCK_TIMEOUT, ...) or as keys of the config file (state-dir: ...);
a flag wins over a variable, which wins over the file.

See 'meshctl help exit-codes' for the exit status of every command.`,
		Example: `  meshctl apply -f mesh.yaml                     # CI, on every merge
  meshctl -q window run store garbage-collect    # cron: 30 3 * * *
  meshctl status
  meshctl help mesh-file                         # the file format`,
		Annotations: map[string]string{exitStatusKey: `  0 done; 2 bad usage. Each command lists its own; 'meshctl help exit-codes'
  lists them all.`},
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			env.preRun = true
			if err := loadConfig(cmd); err != nil {
				return err
			}
			if err := finishGlobal(env); err != nil || needsNoLedger(cmd) {
				return err
			}
			return handOverToEtcd(env)
		},
	}
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.SetIn(env.Stdin)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// "meshctl aply -f x". Cobra found no command "aply" and parsed
		// -f as the root's. The mistyped command is the error to report.
		if word := firstWord(cmd, env.args); word != "" && cmd.HasSubCommands() {
			return unknownCommand(cmd, word)
		}
		return &UsageError{Err: flagHint(cmd, err), Cmd: cmd.CommandPath()}
	})

	pf := root.PersistentFlags()
	pf.StringVar(&g.StateDir, "state-dir", state.DefaultPath(), "state directory shared by meshctl processes")
	pf.StringVar(&g.Config, "config", "", "config file (default: first of $XDG_CONFIG_HOME/meshctl/config.yaml, /etc/meshctl/config.yaml)")
	pf.StringVar(&g.DockerHost, "docker-host", "", "Docker engine address (default: $DOCKER_HOST, else the engine's default socket)")
	pf.DurationVar(&g.LockTimeout, "lock-timeout", 2*time.Minute, "how long to wait for the state lock before exit 3 (0 = do not wait)")
	pf.StringVarP(&g.Output, "output", "o", "text", "output format: text|json")
	pf.BoolVarP(&g.Quiet, "quiet", "q", false, "print nothing on success (for cron)")
	pf.BoolVarP(&g.Verbose, "verbose", "v", false, "add debug logs on stderr")
	pf.StringVar(&g.Ledger, "ledger", "file", "the build ledger: file (the state dir's ledger/) or etcd://HOST:PORT[,HOST:PORT...][/PREFIX]")
	pf.StringVar(&g.LedgerCA, "ledger-ca", "", "CA file (PEM) to verify the etcd ledger's members")
	pf.StringVar(&g.LedgerCert, "ledger-cert", "", "client certificate (PEM) for the etcd ledger")
	pf.StringVar(&g.LedgerKey, "ledger-key", "", "client key (PEM) for the etcd ledger")
	pf.StringVar(&g.MetricsFile, "metrics-file", "", "after apply, window run|ack, build request|record|import and status, write Prometheus metrics here (node_exporter's textfile collector; name ends in .prom)")
	pf.StringVar(&g.HostName, "host-name", "", "this host's name in the mesh, for windows published to an etcd ledger (default: the OS host name)")
	root.MarkFlagsMutuallyExclusive("quiet", "verbose")

	// Every command, one constructor each, in its own file with its help,
	// Examples and EXIT STATUS. A new command is that file and a line here.
	// A subcommand's line is in its group's constructor, as in build.go.
	root.AddCommand(
		newApplyCmd(env),
		newBuildCmd(env),
		newConvertCmd(env),
		newStatusCmd(env),
		newVersionCmd(env),
		newWindowCmd(env),
		newMeshCmd(env),
		newExitCodesTopic(),
		newMeshFileTopic(),
	)
	root.SetHelpCommand(newHelpCmd())
	root.InitDefaultCompletionCmd() // now, not at Execute, for strictGroups to see it
	completionHelp(root)
	strictGroups(root)
	// --version prints what "meshctl version" prints.
	root.Version = buildVersion().String()
	root.SetVersionTemplate("{{.Version}}\n")
	addHelp(root)
	addCompletions(root, env)
	return root
}

// firstWord returns the first word of args that is no flag nor a flag's
// value, after the words that name cmd. For meshctl window, those words are
// "window". It returns "" when there is none.
func firstWord(cmd *cobra.Command, args []string) string {
	skip := strings.Fields(cmd.CommandPath())[1:]
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return ""
		case strings.HasPrefix(a, "--"):
			name, _, hasValue := strings.Cut(a[2:], "=")
			if f := cmd.Flags().Lookup(name); f != nil && !hasValue && f.Value.Type() != "bool" {
				i++ // its value
			}
		case strings.HasPrefix(a, "-") && len(a) == 2:
			if f := cmd.Flags().ShorthandLookup(a[1:]); f != nil && f.Value.Type() != "bool" {
				i++
			}
		case strings.HasPrefix(a, "-"):
		case len(skip) > 0 && a == skip[0]:
			skip = skip[1:]
		default:
			return a
		}
	}
	return ""
}

// flagHint adds a "did you mean" to an unknown flag, as --dryrun → --dry-run.
func flagHint(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	if s := mesh.Suggest(name, names); s != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, s)
	}
	return err
}

// strictGroups makes meshctl and each command group, such as window and
// build, refuse words that are none of their subcommands. It exits 2, with
// the error and a "did you mean" on stderr, and nothing on stdout. Cobra's
// default prints the help on stdout and exits 0, so a mistyped cron line
// would "succeed" every night.
//
// A bare group ("meshctl window") is refused alike, exit 2. A cron line or
// script that names no subcommand is a mistake too. Its subcommands go to
// stderr, a line each, not its 40 lines of help. Only a bare "meshctl"
// prints its help on stdout and exits 0.
func strictGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		strictGroups(sub)
	}
	if !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = groupArgs
	c.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor does not apply
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !cmd.HasParent() && len(args) == 0 {
			return cmd.Help()
		}
		return groupArgs(cmd, args) // not reached: cobra checks Args first
	}
}

// groupArgs is the Args of a command group. No word after it is valid,
// since cobra has already matched every subcommand.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		if !cmd.HasParent() {
			return nil
		}
		printSubcommands(cmd.ErrOrStderr(), cmd)
		return &UsageError{Err: fmt.Errorf("%s needs a subcommand: %s", cmd.CommandPath(), strings.Join(subcommandNames(cmd), ", ")), Cmd: cmd.CommandPath()}
	}
	return unknownCommand(cmd, args[0])
}

// printSubcommands lists cmd's subcommands to w, each with its summary.
func printSubcommands(w io.Writer, cmd *cobra.Command) {
	tw := newTable(w)
	fmt.Fprintf(tw, "Available commands of %s:\n", cmd.CommandPath())
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			fmt.Fprintf(tw, "  %s\t%s\n", c.Name(), c.Short)
		}
	}
	tw.Flush()
}

// unknownCommand is the usage error for a word that is none of cmd's
// subcommands, with the nearest ones as suggestions.
func unknownCommand(cmd *cobra.Command, word string) error {
	msg := fmt.Sprintf("unknown command %q for %q", word, cmd.CommandPath())
	if s := cmd.SuggestionsFor(word); len(s) > 0 {
		for i := range s {
			s[i] = strconv.Quote(s[i])
		}
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	} else {
		msg += fmt.Sprintf("; it has: %s", strings.Join(subcommandNames(cmd), ", "))
	}
	return &UsageError{Err: errors.New(msg), Cmd: cmd.CommandPath()}
}

// subcommandNames are the names of cmd's visible subcommands.
func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return names
}

// newHelpCmd replaces cobra's help command, which prints the root's help and
// exits 0 for a topic it does not know.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil {
				return &UsageError{Err: err, Cmd: "meshctl help"}
			}
			if len(rest) > 0 && target.HasSubCommands() {
				if t := nearTopic(target, rest[0]); t != "" {
					return &UsageError{Err: fmt.Errorf("unknown help topic %q; did you mean %q?", rest[0], t), Cmd: "meshctl help"}
				}
				return unknownCommand(target, rest[0])
			}
			return target.Help()
		},
	}
}

// finishGlobal checks the global options once they are all known and sets
// up logging from them.
func finishGlobal(env *Env) error {
	g := &env.Global
	switch g.Output {
	case "text", "json":
	default:
		return usageErrorf("--output must be text or json, not %q", g.Output)
	}
	if g.LockTimeout < 0 {
		return usageErrorf("--lock-timeout must not be negative")
	}
	if err := checkLedger(g); err != nil {
		return err
	}
	level := slog.LevelWarn
	switch {
	case g.Verbose:
		level = slog.LevelDebug
	case g.Quiet:
		level = slog.LevelError
	}
	env.Log = slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: level}))
	return nil
}

// usageArgs wraps a cobra argument check so that its error is a usage error.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			// Say what the command takes. "accepts 2 arg(s), received 1"
			// alone does not.
			return &UsageError{Err: fmt.Errorf("%w; usage: %s", err, cmd.UseLine()), Cmd: cmd.CommandPath()}
		}
		return nil
	}
}

func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}
