package cli

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/spf13/cobra"
)

func newMeshCmd(env *Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mesh",
		Short: "See and mend the mesh's records in etcd: its members, and slots of max-unavailable",
		Long: `See and mend what the hosts of a mesh record in the etcd ledger.

Each host's apply records, under its --host-name, the modules it runs that use
the mesh (PREFIX/mesh/members/MODULE/HOST): those that set max-unavailable or
have a mesh: all step. It takes a slot (PREFIX/mesh/slots/MODULE/HOST) before
it takes a module with max-unavailable down. Every mesh command needs
--ledger etcd://….`,
		Example: `  meshctl mesh hosts
  meshctl mesh release web web-2`,
		Annotations: map[string]string{exitStatusKey: `  2    no subcommand (its subcommands are listed on stderr), or an unknown
       one; see each subcommand`},
		Args: usageArgs(cobra.NoArgs),
	}
	cmd.AddCommand(newMeshHostsCmd(env), newMeshForgetCmd(env), newMeshReleaseCmd(env))
	return cmd
}

const meshExit = `  0    done
  1    the etcd ledger did not answer, or refused
  2    bad usage, no etcd ledger (--ledger etcd://…)`

func newMeshHostsCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "hosts [MODULE]",
		Short: "List the hosts that run each module that uses the mesh, and the slots they hold",
		Long: `List the members of the mesh: each host that runs a module with
max-unavailable or a mesh: all step, with the budget its file gives (the
smallest of them holds; - for none), its steps and its state: up, or down
while it holds the module's slot (since when, by which pid, for which
containers). A slot held by a host that is no member is listed too. One
linearizable read of etcd.

-o json prints {"members":[{"host","module","max_unavailable","steps",
"updated_at","state"}],"slots":[{"host","module","token","pid","taken_at",
"deadline","containers"}]}; state is "up" or "down"; max_unavailable is 0
for none.`,
		Example: `  meshctl mesh hosts
  meshctl mesh hosts web -o json`,
		Annotations: map[string]string{exitStatusKey: meshExit},
		Args:        usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			module := ""
			if len(args) == 1 {
				module = args[0]
			}
			return runMeshHosts(cmd.Context(), env, module)
		},
	}
}

func newMeshForgetCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "forget HOST",
		Short: "Remove a host gone for good from the mesh: its member records and slots",
		Long: `Remove a host that is gone for good from the mesh: every member record and
every slot it holds, in one etcd transaction. It prints what it removed. A
host that is still alive records itself again at its next apply that changes
its modules.

-o json prints {"host","members":[…],"slots":[…]}, what was removed.`,
		Example: `  meshctl mesh forget web-3`,
		Annotations: map[string]string{exitStatusKey: meshExit + `; a host with
       no record in the mesh`},
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMeshForget(cmd.Context(), env, args[0])
		},
	}
}

func newMeshReleaseCmd(env *Env) *cobra.Command {
	return &cobra.Command{
		Use:   "release MODULE HOST",
		Short: "Give back a slot of a module's budget that a dead apply left held",
		Long: `Give back HOST's slot of MODULE's budget of hosts down, whoever holds it.

A slot is not bound to a lease: an apply that dies leaves it held, since its
host may still be down. That host's next apply gives it back once the module
runs healthy. Use release when that host cannot apply again soon and you have
checked that the module runs there (or that the host is gone: mesh forget).

-o json prints {"module","host","released":{"host","module","token","pid",
"taken_at","deadline","containers"}}.`,
		Example: `  meshctl mesh hosts web          # web web-2 ... down: slot held since 03:30:02
  meshctl mesh release web web-2`,
		Annotations: map[string]string{exitStatusKey: meshExit + `; HOST holds
       no slot of MODULE`},
		Args: usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMeshRelease(cmd.Context(), env, args[0], args[1])
		},
	}
}

// meshLedger opens the etcd ledger a mesh command needs. Without one it is
// a usage error.
func meshLedger(env *Env) (*ledger.Ledger, error) {
	cfg, err := env.etcdLedger()
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, usageErrorf("the mesh's records are in etcd: set --ledger etcd://HOST:PORT[,HOST:PORT…] (or MESHCTL_LEDGER)")
	}
	return ledger.OpenEtcd(*cfg)
}

type meshMemberJSON struct {
	ledger.Member
	State string `json:"state"`
}

type meshHostsJSON struct {
	Members []meshMemberJSON `json:"members"`
	Slots   []ledger.Slot    `json:"slots"`
}

func runMeshHosts(ctx context.Context, env *Env, module string) error {
	l, err := meshLedger(env)
	if err != nil {
		return err
	}
	defer l.Close()
	st, err := l.Mesh(ctx, module)
	if err != nil {
		return err
	}
	slot := map[string]ledger.Slot{}
	for _, s := range st.Slots {
		slot[s.Module+"/"+s.Host] = s
	}
	out := meshHostsJSON{Members: []meshMemberJSON{}, Slots: st.Slots}
	if out.Slots == nil {
		out.Slots = []ledger.Slot{}
	}
	member := map[string]bool{}
	for _, m := range st.Members {
		state := "up"
		if _, ok := slot[m.Module+"/"+m.Host]; ok {
			state = "down"
		}
		member[m.Module+"/"+m.Host] = true
		out.Members = append(out.Members, meshMemberJSON{Member: m, State: state})
	}
	if env.JSON() {
		return env.PrintJSON(out)
	}
	if env.Global.Quiet {
		return nil
	}
	if len(out.Members) == 0 && len(out.Slots) == 0 {
		fmt.Fprintln(env.Stdout, "no host runs a module that uses the mesh (max-unavailable or mesh: all)")
		return nil
	}
	tw := newTable(env.Stdout)
	fmt.Fprintln(tw, "MODULE\tHOST\tMAX-UNAVAILABLE\tSTEPS\tSTATE")
	type row struct{ module, host, text string }
	var rows []row
	for _, m := range out.Members {
		var steps []string
		for s := range m.Steps {
			steps = append(steps, s)
		}
		sort.Strings(steps)
		text := fmt.Sprintf("%s\t%s\t%s", budgetText(m.MaxUnavailable), dash(strings.Join(steps, ",")), slotState(slot, m.Module, m.Host))
		rows = append(rows, row{m.Module, m.Host, text})
	}
	for _, s := range out.Slots {
		if !member[s.Module+"/"+s.Host] {
			rows = append(rows, row{s.Module, s.Host, "-\t-\t" + slotState(slot, s.Module, s.Host) + " (not a member)"})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		return rows[i].module+"/"+rows[i].host < rows[j].module+"/"+rows[j].host
	})
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.module, r.host, r.text)
	}
	return tw.Flush()
}

// slotState says whether host holds module's slot, and since when.
func slotState(slots map[string]ledger.Slot, module, host string) string {
	s, ok := slots[module+"/"+host]
	if !ok {
		return "up"
	}
	return fmt.Sprintf("down: slot held since %s by pid %d (%s)", state.When(s.TakenAt), s.PID, dash(strings.Join(s.Containers, ", ")))
}

// budgetText is a member's max-unavailable, "-" for none.
func budgetText(n int) string {
	if n <= 0 {
		return "-"
	}
	return strconv.Itoa(n)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

type meshForgetJSON struct {
	Host    string          `json:"host"`
	Members []ledger.Member `json:"members"`
	Slots   []ledger.Slot   `json:"slots"`
}

func runMeshForget(ctx context.Context, env *Env, host string) error {
	l, err := meshLedger(env)
	if err != nil {
		return err
	}
	defer l.Close()
	gone, err := l.ForgetHost(ctx, host)
	if err != nil {
		return err
	}
	if len(gone.Members) == 0 && len(gone.Slots) == 0 {
		return fault.New(fault.BadInput, "host %s has no record in the mesh (meshctl mesh hosts lists them); nothing removed", host)
	}
	out := meshForgetJSON{Host: host, Members: gone.Members, Slots: gone.Slots}
	if out.Members == nil {
		out.Members = []ledger.Member{}
	}
	if out.Slots == nil {
		out.Slots = []ledger.Slot{}
	}
	if env.JSON() {
		return env.PrintJSON(out)
	}
	for _, m := range gone.Members {
		budget := "no max-unavailable"
		if m.MaxUnavailable > 0 {
			budget = fmt.Sprintf("max-unavailable %d", m.MaxUnavailable)
		}
		fmt.Fprintf(env.Stdout, "removed host %s from module %s (%s)\n", host, m.Module, budget)
	}
	for _, s := range gone.Slots {
		fmt.Fprintf(env.Stdout, "released host %s's slot of module %s, held since %s by pid %d\n", host, s.Module, state.When(s.TakenAt), s.PID)
	}
	return nil
}

type meshReleaseJSON struct {
	Module   string      `json:"module"`
	Host     string      `json:"host"`
	Released ledger.Slot `json:"released"`
}

func runMeshRelease(ctx context.Context, env *Env, module, host string) error {
	l, err := meshLedger(env)
	if err != nil {
		return err
	}
	defer l.Close()
	st, err := l.Mesh(ctx, module)
	if err != nil {
		return err
	}
	var held *ledger.Slot
	for i, s := range st.Slots {
		if s.Host == host {
			held = &st.Slots[i]
		}
	}
	if held == nil {
		return fault.New(fault.BadInput, "host %s holds no slot of module %s (meshctl mesh hosts %s lists them); nothing released", host, module, module)
	}
	if _, err := l.GiveBackSlot(ctx, module, host, ""); err != nil {
		return err
	}
	if env.JSON() {
		return env.PrintJSON(meshReleaseJSON{Module: module, Host: host, Released: *held})
	}
	fmt.Fprintf(env.Stdout, "released host %s's slot of module %s, held since %s by pid %d (%s)\n",
		host, module, state.When(held.TakenAt), held.PID, dash(strings.Join(held.Containers, ", ")))
	return nil
}
