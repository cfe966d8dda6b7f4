package cli

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/spf13/cobra"
)

// This file gives shell completion that knows the host. It offers module
// and step names from the last applied state, or from window run's -f
// FILE. It offers the windows of the history. From the ledger, its files
// or etcd, it offers build ids, plans and modules. It reads the state
// directory's files read-only (state.Peek). It reads the file ledger under
// its lock without waiting, and etcd within completionTimeout. It creates
// no state directory. It offers nothing rather than fail or wait.

// completionTimeout bounds what a completion reads. A shell must not hang.
const completionTimeout = 2 * time.Second

// addCompletions wires the completion functions into the command tree.
func addCompletions(root *cobra.Command, env *Env) {
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(
		[]string{"text\tplain text", "json\tone JSON document"}, cobra.ShellCompDirectiveNoFileComp))
	on := func(path string, fn cobra.CompletionFunc) {
		c, _, err := root.Find(strings.Fields(path))
		if err == nil && c.Name() == path[strings.LastIndex(path, " ")+1:] {
			c.ValidArgsFunction = fn
		}
	}
	on("window run", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		// The step comes from -f FILE when given, as the window will take it.
		var f *mesh.File
		if p, _ := cmd.Flags().GetString("file"); p != "" && p != "-" {
			f, _ = mesh.Load(p, nil)
		} else {
			f = appliedFile(cmd, env)
		}
		switch len(args) {
		case 0:
			return moduleCompletions(f, true), cobra.ShellCompDirectiveNoFileComp
		case 1:
			return stepCompletions(f, args[0]), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	})
	// window logs offers the windows of the history, newest first.
	on("window logs", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		d := completionDir(cmd, env)
		if len(args) > 0 || d == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_, hist, err := coord.ReadHolds(d.Read)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for i := len(hist.Windows) - 1; i >= 0; i-- {
			w := hist.Windows[i]
			out = append(out, fmt.Sprintf("%s\t%s/%s %s, closed %s", w.ID, w.Module, w.Step, resultText(w), textTime(w.ClosedAt)))
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	})
	// build request offers the modules the last apply names, and those the
	// ledger knows.
	on("build request", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		return without(ledgerModules(cmd, env, appliedFile(cmd, env)), args), cobra.ShellCompDirectiveNoFileComp
	})
	ledgerModuleArg := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return ledgerModules(cmd, env, appliedFile(cmd, env)), cobra.ShellCompDirectiveNoFileComp
	}
	on("build current", ledgerModuleArg)
	on("build list", ledgerModuleArg)
	// A build to record is a pending one.
	on("build record", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, b := range ledgerBuilds(cmd, env) {
			if b.State == ledger.StatePending {
				out = append(out, fmt.Sprintf("%s\t%s, requested %s", b.ID, b.Module, textTime(b.RequestedAt)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	planArg := func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return planCompletions(ledgerBuilds(cmd, env)), cobra.ShellCompDirectiveNoFileComp
	}
	on("build plan", planArg)
	if c, _, err := root.Find([]string{"build", "request"}); err == nil {
		_ = c.RegisterFlagCompletionFunc("plan", func(cmd *cobra.Command, args []string, s string) ([]string, cobra.ShellCompDirective) {
			return planArg(cmd, nil, s)
		})
	}
	// A module to remove is one the last apply names.
	if c, _, err := root.Find([]string{"apply"}); err == nil && c.Flags().Lookup("remove-module") != nil {
		_ = c.RegisterFlagCompletionFunc("remove-module", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
			return moduleCompletions(appliedFile(cmd, env), false), cobra.ShellCompDirectiveNoFileComp
		})
	}
	// A window to acknowledge is each step's last window, when it failed.
	on("window ack", func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		d := completionDir(cmd, env)
		if d == nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		_, hist, err := coord.ReadHolds(d.Read)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, w := range window.LastFailed(hist.Windows) {
			if w.AckedAt == nil && !slices.Contains(args, w.ID) {
				out = append(out, fmt.Sprintf("%s\t%s/%s %s, closed %s", w.ID, w.Module, w.Step, w.Result, textTime(w.ClosedAt)))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
	for _, path := range [][]string{{"apply"}, {"window", "run"}} {
		if c, _, err := root.Find(path); err == nil && c.Flags().Lookup("file") != nil {
			_ = c.MarkFlagFilename("file", "yaml", "yml", "json")
		}
	}
}

// completionDir opens the state directory read-only, after folding in
// MESHCTL_* variables and the config file. Cobra's __complete runs no
// PersistentPreRun. It returns nil when it cannot.
func completionDir(cmd *cobra.Command, env *Env) *state.Dir {
	if err := loadConfig(cmd); err != nil {
		return nil
	}
	d, err := state.Peek(env.Global.StateDir)
	if err != nil || !d.Exists() {
		return nil
	}
	return d
}

// appliedFile is the last applied mesh file, or nil when there is none.
func appliedFile(cmd *cobra.Command, env *Env) *mesh.File {
	d := completionDir(cmd, env)
	if d == nil {
		return nil
	}
	a, ok, err := record.LoadApplied(d)
	if err != nil || !ok {
		return nil
	}
	return a.File
}

// moduleCompletions are the modules of f. withSteps keeps only those that
// have a step.
func moduleCompletions(f *mesh.File, withSteps bool) []string {
	if f == nil {
		return nil
	}
	var out []string
	for _, name := range f.ModuleNames() {
		m := f.Modules[name]
		if m == nil || (withSteps && len(m.Steps) == 0) {
			continue
		}
		steps := slices.Sorted(maps.Keys(m.Steps))
		desc := fmt.Sprintf("%d container", len(m.Containers))
		if len(m.Containers) != 1 {
			desc += "s"
		}
		if len(steps) > 0 {
			desc += "; steps " + strings.Join(steps, ", ")
		}
		out = append(out, name+"\t"+desc)
	}
	return out
}

// stepCompletions are the steps of module in f, each with what it holds.
func stepCompletions(f *mesh.File, module string) []string {
	if f == nil || f.Modules[module] == nil {
		return nil
	}
	m := f.Modules[module]
	var out []string
	for _, name := range slices.Sorted(maps.Keys(m.Steps)) {
		s := m.Steps[name]
		desc := "holds nothing"
		if s != nil && len(s.Held()) > 0 {
			desc = "holds " + strings.Join(s.Held(), ", ")
		}
		if s != nil {
			desc += "; timeout " + s.TimeoutOrDefault().String()
		}
		out = append(out, name+"\t"+desc)
	}
	return out
}

// ledgerBuilds are the builds the ledger lists. They are the state
// directory's, or etcd's with --ledger etcd://…. It returns none when the
// ledger cannot be read in time.
func ledgerBuilds(cmd *cobra.Command, env *Env) []ledger.Build {
	d := completionDir(cmd, env)
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	cfg, err := env.etcdLedger()
	if err != nil {
		return nil
	}
	if err := handOverToEtcd(env); err != nil {
		return nil
	}
	if cfg != nil {
		cfg.Timeout = completionTimeout
	}
	l, err := openLedgerStore(cfg, func() (*state.Dir, error) {
		if d == nil {
			return nil, errors.New("no state directory")
		}
		// The file ledger reads under its lock, so open the directory for
		// that. It exists, and nothing is created but the lock file.
		return state.Open(d.Path())
	})
	if err != nil {
		return nil
	}
	defer l.Close()
	l.LockTimeout = 0 // never wait for the file ledger's lock
	builds, err := l.List(ctx, "")
	if err != nil {
		return nil
	}
	return builds
}

// ledgerModules are the modules the ledger has builds of, then those of f
// it has none of.
func ledgerModules(cmd *cobra.Command, env *Env, f *mesh.File) []string {
	var out []string
	seen := map[string]bool{}
	for _, b := range ledgerBuilds(cmd, env) {
		if !seen[b.Module] {
			seen[b.Module] = true
			out = append(out, b.Module+"\tin the ledger")
		}
	}
	if f != nil {
		for _, m := range f.ModuleNames() {
			if !seen[m] {
				seen[m] = true
				out = append(out, m+"\tin the last apply")
			}
		}
	}
	return out
}

// planCompletions are the plans of builds, newest first, each with its
// modules.
func planCompletions(builds []ledger.Build) []string {
	modules := map[string][]string{}
	var order []string
	for i := len(builds) - 1; i >= 0; i-- {
		b := builds[i]
		if b.Plan == "" {
			continue
		}
		if _, ok := modules[b.Plan]; !ok {
			order = append(order, b.Plan)
		}
		modules[b.Plan] = append(modules[b.Plan], b.Module)
	}
	var out []string
	for _, p := range order {
		out = append(out, p+"\t"+strings.Join(modules[p], ", "))
	}
	return out
}

// without drops from completions the words already given.
func without(completions, given []string) []string {
	var out []string
	for _, c := range completions {
		word, _, _ := strings.Cut(c, "\t")
		if !slices.Contains(given, word) {
			out = append(out, c)
		}
	}
	return out
}

// completionHelp gives cobra's completion command and its subcommands, which
// cobra makes, their Examples and EXIT STATUS.
func completionHelp(root *cobra.Command) {
	completion, _, err := root.Find([]string{"completion"})
	if err != nil || completion == root {
		return
	}
	for _, h := range []struct{ shell, example, exit string }{
		{"", `  meshctl completion bash > /etc/bash_completion.d/meshctl
  meshctl completion zsh > "${fpath[1]}/_meshctl"`, `  0    printed; 2 bad usage or an unknown shell`},
		{"bash", `  source <(meshctl completion bash)
  meshctl completion bash > /etc/bash_completion.d/meshctl`, `  0    printed; 2 bad usage`},
		{"zsh", `  meshctl completion zsh > "${fpath[1]}/_meshctl"`, `  0    printed; 2 bad usage`},
		{"fish", `  meshctl completion fish > ~/.config/fish/completions/meshctl.fish`, `  0    printed; 2 bad usage`},
		{"powershell", `  meshctl completion powershell | Out-String | Invoke-Expression`, `  0    printed; 2 bad usage`},
	} {
		c := completion
		if h.shell != "" {
			if c, _, err = completion.Find([]string{h.shell}); err != nil || c == completion {
				continue
			}
		}
		c.Example = h.example
		c.Annotations = map[string]string{exitStatusKey: h.exit}
	}
}
