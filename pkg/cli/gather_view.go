package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

// memberState is one host of a mesh window in a word or two. A host that
// joined and whose session lapsed reads lapsed: it may have died, or be
// cut off from etcd, so what it holds is asked on the host.
func memberState(g ledger.Gathering, m ledger.GatherMember) string {
	switch {
	case m.Closed && m.Back:
		return "back"
	case m.Closed:
		return "closed, not all back"
	case !m.Joined:
		return "not joined"
	case !m.Alive && !g.Over():
		return "lapsed"
	case m.Held:
		return "held"
	default:
		return "joined"
	}
}

// gatheringHosts is a mesh window's hosts and their states, runner first.
func gatheringHosts(g ledger.Gathering) string {
	var parts []string
	for _, m := range g.Members {
		if m.Host == g.Runner {
			parts = append([]string{m.Host + " (runner) " + memberState(g, m)}, parts...)
		} else {
			parts = append(parts, m.Host+" "+memberState(g, m))
		}
	}
	return strings.Join(parts, ", ")
}

// gatheringNote says what a mesh window's state means for a person: how
// it ended, why it failed, or when it gives up gathering.
func gatheringNote(g ledger.Gathering) string {
	switch g.State {
	case ledger.GatherFailed:
		return "failed: " + g.Failure
	case ledger.GatherEnded:
		if g.End == nil {
			return "ended"
		}
		code := ""
		if g.End.Code != nil {
			code = fmt.Sprintf(", exit %d", *g.End.Code)
		}
		return fmt.Sprintf("step %s%s at %s (recorded by %s)", g.End.Result, code, state.When(g.End.At), g.End.By)
	case ledger.GatherStarted:
		return "step running on " + g.Runner + " since " + state.When(g.StartedAt)
	default:
		return "gathers until " + state.When(g.Deadline)
	}
}

// printGatherings is the table of the modules' mesh windows. With none,
// it prints nothing.
func printGatherings(w io.Writer, gs []ledger.Gathering) error {
	if len(gs) == 0 {
		return nil
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "MESH WINDOW\tMODULE/STEP\tSTATE\tHOSTS\tNOTE")
	for _, g := range gs {
		fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", g.ID, g.Module, g.Step, g.State, gatheringHosts(g), gatheringNote(g))
	}
	fmt.Fprintln(tw)
	return tw.Flush()
}
