package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMeshScripts runs testdata/mesh/*.txtar: scripts of several hosts on
// one machine, each a private engine of scripts/hosts.sh, over one etcd
// ledger prefix of the script's own (MESHCTL_LEDGER). "exec on HOST meshctl
// …" runs meshctl as that host. Without the host engines or etcd the test
// skips, saying which; under CI=true it fails.
func TestMeshScripts(t *testing.T) {
	hosts, err := testHosts()
	if err == nil {
		for _, h := range hosts {
			if err = meshrun.PingEngine(h.sock); err != nil {
				err = fmt.Errorf("host %s: %w", h.name, err)
				break
			}
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no host engines: %v", err)
		}
		t.Skipf("no host engines: %v", err)
	}
	eps := etcdtest.Endpoints(t)
	if os.Getenv("MESHCTL_TEST_DOCKER_HOST") == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and no test engine")
		}
		t.Skip("no test engine (the scripts' sync containers and ctr need it)")
	}
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.name
	}
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "mesh"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("MESHCTL_UPDATE_SCRIPTS") == "1",
		Setup: func(env *testscript.Env) error {
			if err := setup(env); err != nil {
				return err
			}
			env.Setenv("ETCD_EPS", eps)
			env.Setenv("MESHCTL_LEDGER", "etcd://"+eps+etcdtest.Prefix(filepath.Base(env.WorkDir)))
			env.Setenv("MESHCTL_TEST_ETCD_DIR", os.Getenv("MESHCTL_TEST_ETCD_DIR"))
			env.Setenv("MESHCTL_TEST_HOSTS", os.Getenv("MESHCTL_TEST_HOSTS"))
			env.Setenv("HOSTS", strings.Join(names, " "))
			return nil
		},
		Condition: condition,
		Cmds:      scriptCmds(),
	})
}

// testHost is one host engine of MESHCTL_TEST_HOSTS.
type testHost struct{ name, sock string }

// testHosts reads MESHCTL_TEST_HOSTS ("host-a=unix:///…,host-b=…").
func testHosts() ([]testHost, error) {
	return parseHosts(os.Getenv("MESHCTL_TEST_HOSTS"))
}

func parseHosts(list string) ([]testHost, error) {
	if list == "" {
		return nil, fmt.Errorf("MESHCTL_TEST_HOSTS is not set (scripts/hosts.sh start; eval \"$(scripts/hosts.sh env)\")")
	}
	var out []testHost
	for _, kv := range strings.Split(list, ",") {
		name, sock, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !strings.HasPrefix(sock, "unix:///") {
			return nil, fmt.Errorf("MESHCTL_TEST_HOSTS: %q is not HOST=unix:///PATH", kv)
		}
		out = append(out, testHost{name, sock})
	}
	return out, nil
}

// hostSock returns the engine of host name in the script's hosts.
func hostSock(list, name string) (string, error) {
	hosts, err := parseHosts(list)
	if err != nil {
		return "", err
	}
	for _, h := range hosts {
		if h.name == name {
			return h.sock, nil
		}
	}
	return "", fmt.Errorf("no host %s in MESHCTL_TEST_HOSTS=%s", name, list)
}

// onMain is the program "on HOST PROG ARG...": it runs PROG, in place of
// itself, as a process of host HOST. That is, with HOST's engine as
// DOCKER_HOST, $WORK/hosts/HOST/state as its state directory and HOST as
// its host name. The process is PROG's own, so a background "exec on … &x&"
// is meshctl itself, and a signal reaches it.
func onMain() int {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: on HOST PROG ARG...")
		return 2
	}
	host, prog := os.Args[1], os.Args[2]
	sock, err := hostSock(os.Getenv("MESHCTL_TEST_HOSTS"), host)
	if err != nil {
		fmt.Fprintln(os.Stderr, "on:", err)
		return 2
	}
	work := os.Getenv("WORK")
	if work == "" {
		fmt.Fprintln(os.Stderr, "on: WORK is not set: run it from a script")
		return 2
	}
	state := filepath.Join(work, "hosts", host, "state")
	path, err := exec.LookPath(prog)
	if err != nil {
		fmt.Fprintln(os.Stderr, "on:", err)
		return 2
	}
	env := []string{"DOCKER_HOST=" + sock, "MESHCTL_TEST_DOCKER_HOST=" + sock, "MESHCTL_STATE_DIR=" + state, "MESHCTL_HOST_NAME=" + host}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "DOCKER_HOST", "MESHCTL_TEST_DOCKER_HOST", "MESHCTL_STATE_DIR", "MESHCTL_HOST_NAME":
		default:
			env = append(env, kv)
		}
	}
	err = syscall.Exec(path, os.Args[2:], env)
	fmt.Fprintln(os.Stderr, "on:", err)
	return 2
}

// scriptHostEngine returns the engine a script command acts on: the test
// engine, or with a first argument "@HOST" that host's, and the rest.
func scriptHostEngine(ts *testscript.TestScript, args []string) (string, []string) {
	if len(args) > 0 && strings.HasPrefix(args[0], "@") {
		sock, err := hostSock(ts.Getenv("MESHCTL_TEST_HOSTS"), args[0][1:])
		ts.Check(err)
		return sock, args[1:]
	}
	return ts.Getenv("MESHCTL_TEST_DOCKER_HOST"), args
}

// hostRecorders are the event records of hostevents, by script.
var (
	hostRecMu sync.Mutex
	hostRecs  = map[string]map[string]*hostRec{} // WORK and module: host: its record
)

// hostRec is one host's record: the events, and the containers that ran as
// it began, as start events at the zero time.
type hostRec struct {
	r       *eventcheck.Recorder
	initial []eventcheck.Event
}

func (h *hostRec) events() []eventcheck.Event {
	return append(append([]eventcheck.Event(nil), h.initial...), h.r.Events()...)
}

// cmdHostEvents follows the host engines' events, as the ground truth of
// what ran:
//
//	hostevents start MODULE          record MODULE's container events on every host
//	[!] hostevents down MODULE N     check that at no instant more than N hosts
//	                                 had MODULE down (with !: that more than N had)
//	hostevents steps MODULE STEP N   check that STEP's container ran N times, all hosts together
//	[!] hostevents normal MODULE STEP   check that no container of MODULE there before
//	                                 the start ran, on any host, while STEP's container ran
//	                                 (with !: that one did)
func cmdHostEvents(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: hostevents start|down|steps|normal MODULE ...")
	}
	hosts, err := parseHosts(ts.Getenv("MESHCTL_TEST_HOSTS"))
	ts.Check(err)
	work, module := ts.Getenv("WORK"), args[1]
	key := work + "\x00" + module
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if neg && args[0] != "down" && args[0] != "normal" {
		ts.Fatalf("hostevents %s does not take !", args[0])
	}
	if args[0] == "start" {
		recs := map[string]*hostRec{}
		for _, h := range hosts {
			r, err := eventcheck.Record(ctx, h.sock, func(_ string, labels map[string]string) bool {
				return labels["io.meshctl.module"] == module
			})
			ts.Check(err)
			rec := &hostRec{r: r}
			recs[h.name] = rec
			// Listed once the record runs: a container that stops meanwhile
			// has its die recorded after its start here.
			c, err := engine.New(h.sock)
			ts.Check(err)
			list, err := c.List(ctx, map[string]string{"io.meshctl.module": module})
			c.Close()
			ts.Check(err)
			for _, x := range list {
				if x.Running {
					rec.initial = append(rec.initial, eventcheck.Event{Action: "start", ID: x.ID, Name: x.Name, Labels: x.Labels})
				}
			}
		}
		hostRecMu.Lock()
		hostRecs[key] = recs
		hostRecMu.Unlock()
		ts.Defer(func() {
			for _, r := range recs {
				r.r.Stop()
			}
			hostRecMu.Lock()
			if hostRecs[key] != nil && hostRecs[key][hosts[0].name] == recs[hosts[0].name] {
				delete(hostRecs, key)
			}
			hostRecMu.Unlock()
		})
		return
	}
	hostRecMu.Lock()
	recs := hostRecs[key]
	hostRecMu.Unlock()
	if recs == nil {
		ts.Fatalf("hostevents %s %s: no hostevents start %s before", args[0], module, module)
	}
	// Every host's events up to now, logged for a failure's reader.
	events := map[string][]eventcheck.Event{}
	for _, h := range hosts {
		r := recs[h.name]
		ts.Check(r.r.Sync(ctx, "meshtest/busybox:1"))
		if err := r.r.Err(); err != nil {
			ts.Fatalf("host %s: %v", h.name, err)
		}
		evs := r.events()
		events[h.name] = evs
		ts.Logf("host %s: %d events of %s", h.name, len(evs), module)
		for _, e := range evs {
			if strings.HasPrefix(e.Action, "exec_") {
				continue // the healthcheck's probes
			}
			ts.Logf("  %s %s %s %.12s %s", e.At.Format("15:04:05.000"), e.Action, e.Detail, e.ID, e.Name)
		}
	}
	switch args[0] {
	case "down":
		if len(args) != 3 {
			ts.Fatalf("usage: [!] hostevents down MODULE N")
		}
		n, err := strconv.Atoi(args[2])
		ts.Check(err)
		down := map[string][]eventcheck.Interval{}
		for _, h := range hosts {
			down[h.name] = eventcheck.Down(events[h.name], module)
			fmt.Fprint(ts.Stdout(), eventcheck.DownString(h.name, down[h.name]))
		}
		most, at, which := eventcheck.MostDown(down)
		fmt.Fprintf(ts.Stdout(), "at most %d of %d hosts had %s down at once\n", most, len(hosts), module)
		if (most > n) != neg {
			if neg {
				ts.Fatalf("at most %d hosts had %s down at once, want more than %d", most, module, n)
			}
			ts.Fatalf("%d hosts had %s down at once at %s (%s), want at most %d", most, module,
				at.Format("15:04:05.000"), strings.Join(which, ", "), n)
		}
	case "steps", "normal":
		if len(args) != 3+btoi(args[0] == "steps") {
			ts.Fatalf("usage: hostevents steps MODULE STEP N | hostevents normal MODULE STEP")
		}
		var steps []eventcheck.Interval
		for _, h := range hosts {
			for _, iv := range eventcheck.StepIntervals(eventcheck.Intervals(events[h.name]), module, args[2]) {
				fmt.Fprintf(ts.Stdout(), "%s: step %s\n", h.name, iv)
				steps = append(steps, iv)
			}
		}
		if args[0] == "steps" {
			n, err := strconv.Atoi(args[3])
			ts.Check(err)
			if len(steps) != n {
				ts.Fatalf("step %s of %s ran %d times on the hosts, want %d", args[2], module, len(steps), n)
			}
			return
		}
		if len(steps) == 0 {
			ts.Fatalf("step %s of %s never ran on the hosts", args[2], module)
		}
		var bad []string
		for _, h := range hosts {
			normal := eventcheck.Existing(events[h.name], module)
			var services []string
			for _, iv := range normal {
				services = append(services, iv.Service)
			}
			for _, v := range eventcheck.HeldDuringStep(normal, steps, services) {
				bad = append(bad, h.name+": "+v.String())
			}
		}
		fmt.Fprint(ts.Stdout(), strings.Join(append(bad, ""), "\n"))
		if (len(bad) > 0) != neg {
			if neg {
				ts.Fatalf("no normal container of %s ran while its step ran", module)
			}
			ts.Fatalf("a normal container of %s ran while its step ran:\n%s", module, strings.Join(bad, "\n"))
		}
	default:
		ts.Fatalf("hostevents: unknown subcommand %q", args[0])
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestParseHosts: MESHCTL_TEST_HOSTS as scripts/hosts.sh env prints it, and
// what on refuses.
func TestParseHosts(t *testing.T) {
	hosts, err := parseHosts("host-a=unix:///tmp/m/host-a/docker.sock,host-b=unix:///tmp/m/host-b/docker.sock")
	if err != nil || len(hosts) != 2 || hosts[1] != (testHost{"host-b", "unix:///tmp/m/host-b/docker.sock"}) {
		t.Fatalf("parseHosts = %v, %v", hosts, err)
	}
	for _, bad := range []string{"", "host-a", "host-a=tcp://127.0.0.1:2375", "=unix:///x"} {
		if _, err := parseHosts(bad); err == nil {
			t.Errorf("parseHosts(%q) took it", bad)
		}
	}
	if _, err := hostSock("host-a=unix:///a.sock", "host-z"); err == nil || !strings.Contains(err.Error(), "no host host-z") {
		t.Errorf("hostSock of an unknown host: %v", err)
	}
}
