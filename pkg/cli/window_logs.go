package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/spf13/cobra"
)

func newWindowLogsCmd(env *Env) *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "logs [ID]",
		Short: "Print the kept output of a window's step",
		Long: fmt.Sprintf(`Print the output of a window's step, as kept in the state directory beside the
history: its last %d KiB, for each window the history holds. Without ID, the
last window that closed.

A window not yet closed prints its step's output so far (its last %d KiB,
which the running window writes to window-logs/ID.live at most once a second);
stderr says so. A window still in its open, its step not started, prints
nothing.

--follow follows an open window's output as it comes, every 250 ms, until
the window closes, then exits with the window's outcome: 0 when it ended ok, 1
when it did not (its step failed, timed out or was interrupted, a container did
not come back) or when its process died before its close. Interrupted (SIGINT,
SIGTERM), it stops following, exit 130; the window goes on. On a closed
window, it prints the kept log and exits as the window ended.

A window that was part of a mesh window (mesh: all) names it and the host
that ran its step, on stderr; with an etcd ledger, its hosts' states too. Its
output is in the logs of the host that ran the step.

-o json prints {"id","module","step","truncated","output","live"} (live: the
window is not yet closed; not with --follow), and for a mesh window
"gathering", "runner" and "mesh" (the gathering as window list --mesh has it).`, window.LogLimit>>10, window.LogLimit>>10),
		Example: `  meshctl window logs                       # the last window's step output
  meshctl window logs w-20261201T033002-1a2b3c
  meshctl window logs --follow w-20261201T033002-1a2b3c   # to its close
  meshctl window logs -o json | jq -r .output`,
		Annotations: map[string]string{exitStatusKey: `  0    printed; --follow: the window ended ok
  1    --follow: the window did not end ok, or died before its close
  2    an unknown window id, a window that kept no log (its step did not run),
       no window closed yet, a state file that cannot be read, --follow with
       -o json
  130  --follow interrupted (SIGINT, SIGTERM); the window goes on`},
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			if follow {
				if env.JSON() {
					return &UsageError{Err: fmt.Errorf("--follow prints the output as it comes: it takes no -o json"), Cmd: cmd.CommandPath()}
				}
				return runWindowFollow(cmd.Context(), env, id)
			}
			return runWindowLogs(cmd.Context(), env, id)
		},
	}
	cmd.Flags().BoolVar(&follow, "follow", false, "follow an open window's output until it closes; exit as it ended")
	return cmd
}

type windowLogJSON struct {
	ID        string `json:"id"`
	Module    string `json:"module"`
	Step      string `json:"step"`
	Truncated bool   `json:"truncated"`
	Output    string `json:"output"`
	Live      bool   `json:"live"`
	// Gathering and Runner name a mesh window. Mesh is its gathering as
	// etcd has it now, when an etcd ledger is configured and answers.
	Gathering string            `json:"gathering,omitempty"`
	Runner    string            `json:"runner,omitempty"`
	Mesh      *ledger.Gathering `json:"mesh,omitempty"`
}

func runWindowLogs(ctx context.Context, env *Env, id string) error {
	// Reading a log changes nothing. Not even a missing state directory is made.
	dir, err := env.StateReadOnly()
	if err != nil {
		return err
	}
	l, err := window.ReadLog(dir, id)
	if err != nil {
		return err
	}
	g := meshWindowOf(ctx, env, l)
	if env.JSON() {
		return env.PrintJSON(windowLogJSON{ID: l.ID, Module: l.Module, Step: l.Step, Truncated: l.Truncated, Output: l.Output, Live: l.Live,
			Gathering: l.Gathering, Runner: l.Runner, Mesh: g})
	}
	if l.Gathering != "" {
		where := ""
		if l.Runner != env.hostName() {
			where = "; its output is in meshctl window logs on " + l.Runner
		}
		fmt.Fprintf(env.Stderr, "(window %s was part of mesh window %s: its step ran on host %s%s)\n", l.ID, l.Gathering, l.Runner, where)
		if g != nil {
			_ = printGatherings(env.Stderr, []ledger.Gathering{*g})
		}
	}
	if l.Live {
		fmt.Fprintf(env.Stderr, "(window %s is not closed yet: its step's output so far follows; --follow follows it)\n", l.ID)
	}
	if l.Truncated {
		fmt.Fprintf(env.Stderr, "(window %s: output truncated, its last %d KiB follow)\n", l.ID, window.LogLimit>>10)
	}
	fmt.Fprint(env.Stdout, l.Output)
	return nil
}

// runWindowFollow prints window id's output as it comes, until it closes.
// It exits as the window ended. Without id, it follows the one window not
// yet closed, or prints the last closed one's log.
func runWindowFollow(ctx context.Context, env *Env, id string) error {
	dir, err := env.StateReadOnly()
	if err != nil {
		return err
	}
	if id == "" {
		if id, err = followedID(dir); err != nil {
			return err
		}
	}
	if !window.ValidID(id) {
		return fault.New(fault.BadInput, "%q is not a window id (w-…): see meshctl window list", id)
	}
	entry, err := window.Follow(ctx, dir, id, window.FollowOptions{
		Print: func(s string) { fmt.Fprint(env.Stdout, s) },
		Note:  func(format string, args ...any) { fmt.Fprintf(env.Stderr, format, args...) },
	})
	if err != nil {
		return err
	}
	if entry.Failed() {
		return fault.New(fault.Failed, "window %s ended %s", entry.ID, entry.Result)
	}
	return nil
}

// followedID is the window --follow follows without an id: the one not
// yet closed, else the last that closed.
func followedID(dir *state.Dir) (string, error) {
	holds, hist, err := coord.ReadHolds(dir.Read)
	if err != nil {
		return "", err
	}
	switch n := len(holds.Holds); {
	case n == 1:
		return holds.Holds[0].ID, nil
	case n > 1:
		var ids []string
		for _, h := range holds.Holds {
			ids = append(ids, h.ID)
		}
		return "", fault.New(fault.BadInput, "%d windows are not closed (%s): name the one to follow", n, strings.Join(ids, ", "))
	case len(hist.Windows) == 0:
		return "", fault.New(fault.BadInput, "no window is open or has closed in %s yet", dir.Path())
	}
	return hist.Windows[len(hist.Windows)-1].ID, nil
}

// meshWindowOf reads the mesh window a log was part of, for a person. It
// is nil for a window of this host only, without an etcd ledger, or when
// etcd cannot say. The last says so on stderr.
func meshWindowOf(ctx context.Context, env *Env, l *window.Log) *ledger.Gathering {
	if l.Gathering == "" {
		return nil
	}
	m, closeMesh, err := meshHolds(env)
	if err == nil && m.Gather == nil {
		return nil
	}
	if err == nil {
		defer closeMesh()
		var g ledger.Gathering
		var ok bool
		if g, ok, err = m.Gather.GatheringByID(ctx, l.Module, l.Gathering); err == nil && ok {
			return &g
		}
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "(etcd cannot say how the hosts of mesh window %s did: %v)\n", l.Gathering, err)
	}
	return nil
}
