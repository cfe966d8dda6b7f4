package cli

import (
	"context"
	"strings"

	"github.com/meshctl/meshctl/pkg/window"
)

// runWindowDryRun is window run --dry-run. It opens the state directory
// read-only and prints what the window would do. Its error is the one a
// real run would end with now, after the report.
func runWindowDryRun(ctx context.Context, env *Env, opts *windowRunOptions) error {
	file, err := opts.mesh(ctx, env)
	if err != nil {
		return err
	}
	dir, eng, err := env.StateReadOnlyAndEngine()
	if err != nil {
		return err
	}
	defer eng.Close()
	// It reads etcd as a mesh window's join would, and writes nothing.
	budget, m, closeBudget, err := meshAndBudget(env, dir)
	if err != nil {
		return err
	}
	defer closeBudget()
	rep, err := window.DryRunOf(ctx, dir, eng, window.Options{Module: opts.module, Step: opts.step,
		File: file, Timeout: opts.timeout, Wait: opts.wait, Now: env.Now, Budget: budget, Gather: m.Gather, Host: m.Host})
	switch {
	case rep == nil:
		return err
	case env.JSON():
		if perr := env.PrintJSON(rep); perr != nil {
			return perr
		}
	case !env.Global.Quiet:
		printDryRun(env, rep, exitCodeOf(ctx, err))
	}
	return err
}

// dryRunVerdicts say a dry run's verdict in words.
var dryRunVerdicts = map[string]string{
	window.VerdictRun:    "would run",
	window.VerdictWait:   "would wait, then run",
	window.VerdictBusy:   "busy: would not open",
	window.VerdictFail:   "would fail before stopping anything",
	window.VerdictRefuse: "would be refused before stopping anything",
}

// printDryRun prints a dry run's report, with the exit status it has.
func printDryRun(env *Env, rep *window.DryRun, code int) {
	var holds []string
	for _, h := range rep.Holds {
		holds = append(holds, h.Name+" ("+h.Mode+")")
	}
	if len(holds) == 0 {
		holds = []string{"nothing"}
	}
	env.Printf("window %s/%s, dry run: %s (exit %d)\n", rep.Module, rep.Step, dryRunVerdicts[rep.Verdict], code)
	env.Printf("  holds:    %s\n", strings.Join(holds, ", "))
	env.Printf("  runs:     %s\n", describeStepRun(rep.Run))
	env.Printf("  timeout:  %s\n", rep.Timeout)
	if rep.Mesh != "" {
		env.Printf("  mesh:     %s: every host of the module, gather %s\n", rep.Mesh, rep.Gather)
		if len(rep.Hosts) > 0 {
			env.Printf("  hosts:    %s\n", strings.Join(rep.Hosts, ", "))
		}
	}
	for i, r := range rep.Reasons {
		label := "checks:  "
		if i > 0 {
			label = "         "
		}
		env.Printf("  %s %s\n", label, r)
	}
}

// describeStepRun says in one line what a step runs.
func describeStepRun(r window.StepRun) string {
	if r.Kind == "exec" {
		return "exec " + shellWords(r.Command)
	}
	image := r.Image
	if image == "" {
		image = "(unknown image)"
	}
	parts := []string{"image " + image}
	if len(r.Entrypoint) > 0 {
		parts = append(parts, "entrypoint "+shellWords(r.Entrypoint))
	}
	if len(r.Command) > 0 {
		parts = append(parts, "command "+shellWords(r.Command))
	}
	if len(r.VolumesFrom) > 0 {
		parts = append(parts, "volumes from "+strings.Join(r.VolumesFrom, ", "))
	}
	if r.Network != "" {
		parts = append(parts, "network "+r.Network)
	}
	return strings.Join(parts, "; ")
}

// shellWords joins words as a shell would read them, quoting those that
// need it.
func shellWords(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"\\$`;&|<>()*?[]#~") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		out[i] = w
	}
	return strings.Join(out, " ")
}

// exitCodeOf is the exit status err gives, 0 for none.
func exitCodeOf(ctx context.Context, err error) int {
	if err == nil {
		return exitOK
	}
	return exitCode(ctx, err)
}
