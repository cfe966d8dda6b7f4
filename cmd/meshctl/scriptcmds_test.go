package main

// The scripts' own commands (testdata/script, testdata/etcd), beside
// testscript's (exec, stdout, cmp, …), as cmd/go's scriptcmds_test.go keeps
// its own: the table below gives each one's usage, and testdata/script/README
// explains them with the rest of the script language (TestScriptREADME
// checks that it names every one with its usage).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/rogpeppe/go-internal/testscript"
)

// scriptCmd is a custom script command: its name, whether it takes the !
// prefix, the arguments it takes, what it does, and its function.
type scriptCmd struct {
	name          string
	neg           bool
	args, summary string
	run           func(ts *testscript.TestScript, neg bool, args []string)
}

// usage is the command's synopsis, as testscript's own are written:
// "[!] jsonval PATH REGEX".
func (c scriptCmd) usage() string {
	u := strings.TrimSpace(c.name + " " + c.args)
	if c.neg {
		u = "[!] " + u
	}
	return u
}

// scriptCmdList is every custom script command, by name.
var scriptCmdList = []scriptCmd{
	{"capture", false, "VAR REGEXP", "set VAR from the last stdout: REGEXP's last submatch (or its match); (?m) is on", cmdCapture},
	{"ctr", true, "[@HOST] SUBCOMMAND ARG...", "inspect and change the test engine's containers, or host HOST's (ctr modules|inspect|missing|run|stop|start|kill|rm|wait)", cmdCtr},
	{"ctrlogs", false, "NAME [DUR]", "print a container's stdout and stderr, followed until it exits or for DUR (default 1m)", cmdCtrLogs},
	{"exits", true, "CODE PROG ARG...", "run PROG like exec and check its exact exit status; its output is the next stdout/stderr", cmdExits},
	{"hostevents", true, "start|down|steps|normal MODULE [STEP] [N]", "mesh scripts: record MODULE's container events on every host; check them: never more than N down at once, STEP ran N times, no normal container ran during STEP", cmdHostEvents},
	{"idof", false, "NAME", "print a container's engine id (to tell the same container from a new one of that name)", cmdIDOf},
	{"jsoncapture", false, "VAR PATH", "set VAR from the value at PATH in the last stdout (a non-string as JSON)", cmdJSONCapture},
	{"jsonkeys", false, "PATH KEY...", "check the exact set of keys of the object at PATH in the last stdout", cmdJSONKeys},
	{"jsonlen", false, "PATH N", "check the length of the array at PATH in the last stdout", cmdJSONLen},
	{"jsonval", true, "PATH REGEX", "check that the value at PATH in the last stdout matches REGEX (a non-string as JSON)", cmdJSONVal},
	{"lock", false, "NAME", "take the lock NAME of $MESHCTL_STATE_DIR, as another meshctl would, until unlock or the end", cmdLock},
	{"oldctr", false, "MODULE.CONTAINER SPEC", "create and start a container as an older meshctl would have, with SPEC as its recorded spec", cmdOldCtr},
	{"pidgone", true, "FILE [DUR]", "wait until the process whose pid FILE holds is gone (default 2s); with !, check it runs now", cmdPidGone},
	{"sigwindow", false, "[@HOST] SIGNAL MODULE", "send TERM, INT, HUP or KILL to the process of the open window on MODULE (of host HOST's state dir)", cmdSigWindow},
	{"tcpconns", false, "VAR N|any", "check the connections the listener of tcplisten VAR accepted since the last check (any: none checked), then count from 0", cmdTCPConns},
	{"tcplisten", false, "VAR", "listen on a free port of 127.0.0.1 until the script ends, counting connections; set VAR to HOST:PORT", cmdTCPListen},
	{"unlock", false, "NAME", "release the lock NAME that lock took", cmdUnlock},
	{"waitfile", false, "PATH [DUR]", "wait until PATH exists (default 30s)", cmdWaitFile},
	{"waithold", true, "[@HOST] MODULE [DUR]", "wait until a window on MODULE holds its containers, stopped (default 1m); with !, until none holds it; @HOST: on host HOST", cmdWaitHold},
	{"waithttp", true, "URL [DUR]", "wait until GET URL (loopback only) answers 200 (default 30s); with !, check once that nothing answers", cmdWaitHTTP},
	{"waitmesh", true, "HOST MODULE [DUR]", "etcd scripts: wait until the mesh shows a live window (lease not lapsed) of HOST on MODULE (default 10s); with !, until it no longer does", cmdWaitMesh},
	{"winreap", false, "", "at the script's end, SIGKILL this script's meshctl processes that still run, before earlier cleanups", cmdReapWindows},
}

// scriptCmds returns the custom commands for testscript.Params.Cmds. A
// command that takes no ! refuses it, with its usage.
func scriptCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	m := make(map[string]func(ts *testscript.TestScript, neg bool, args []string), len(scriptCmdList))
	for _, c := range scriptCmdList {
		m[c.name] = func(ts *testscript.TestScript, neg bool, args []string) {
			if neg && !c.neg {
				ts.Fatalf("%s does not take !; usage: %s", c.name, c.usage())
			}
			c.run(ts, neg, args)
		}
	}
	return m
}

// TestScriptREADME checks that testdata/script/README names every custom
// command with its usage, as a line of its own.
func TestScriptREADME(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "script", "README"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, c := range scriptCmdList {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.TrimSpace(l) == c.usage() }) {
			t.Errorf("testdata/script/README has no line %q", c.usage())
		}
	}
}

// TestScriptModulesUnique checks that no two scripts claim the same module
// with "ctr modules": scripts run in parallel on one engine, and each removes
// its modules' containers when it starts and ends, so a shared name lets one
// script remove another's containers mid-run.
func TestScriptModulesUnique(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "script", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, dir := range []string{"etcd", "mesh", filepath.Join("mesh", "pending")} {
		more, err := filepath.Glob(filepath.Join("..", "..", "testdata", dir, "*.txtar"))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, more...)
	}
	owner := map[string]string{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			mods, ok := strings.CutPrefix(strings.TrimSpace(line), "ctr modules ")
			if !ok {
				continue
			}
			for _, m := range strings.Fields(mods) {
				if o, dup := owner[m]; dup && o != filepath.Base(f) {
					t.Errorf("module %s is claimed by both %s and %s", m, o, filepath.Base(f))
				}
				owner[m] = filepath.Base(f)
			}
		}
	}
}

// held are the locks scripts took; scripts run in parallel.
var (
	heldMu sync.Mutex
	held   = map[string]*state.Lock{}
)

// cmdLock takes the lock NAME of $MESHCTL_STATE_DIR in the test process, as
// another meshctl would, until unlock NAME or the script's end.
func cmdLock(ts *testscript.TestScript, neg bool, args []string) {
	d, err := state.Open(ts.Getenv("MESHCTL_STATE_DIR"))
	ts.Check(err)
	l, err := d.Lock(context.Background(), args[0], state.LockOptions{Command: "meshctl test-holder"})
	ts.Check(err)
	key := ts.Getenv("WORK") + "/" + args[0]
	heldMu.Lock()
	held[key] = l
	heldMu.Unlock()
	ts.Defer(func() { l.Unlock() })
}

// listeners are the tcplisten listeners, by $WORK and variable: scripts
// run in parallel.
var (
	listenersMu sync.Mutex
	listeners   = map[string]*countingListener{}
)

// countingListener accepts connections, counts them and closes each at
// once. A client that dials it reaches no server.
type countingListener struct {
	l     net.Listener
	conns atomic.Int64
}

func cmdTCPListen(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: tcplisten VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	cl := &countingListener{l: l}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			cl.conns.Add(1)
			c.Close()
		}
	}()
	ts.Defer(func() { l.Close() })
	listenersMu.Lock()
	listeners[ts.Getenv("WORK")+"/"+args[0]] = cl
	listenersMu.Unlock()
	ts.Setenv(args[0], l.Addr().String())
}

func cmdTCPConns(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: tcpconns VAR N|any")
	}
	listenersMu.Lock()
	cl := listeners[ts.Getenv("WORK")+"/"+args[0]]
	listenersMu.Unlock()
	if cl == nil {
		ts.Fatalf("tcpconns %s: no tcplisten %s", args[0], args[0])
	}
	n := cl.conns.Swap(0)
	if args[1] == "any" {
		return
	}
	want, err := strconv.ParseInt(args[1], 10, 64)
	ts.Check(err)
	if n != want {
		ts.Fatalf("tcpconns %s: %d connections to %s, want %d", args[0], n, cl.l.Addr(), want)
	}
}

func cmdUnlock(ts *testscript.TestScript, neg bool, args []string) {
	key := ts.Getenv("WORK") + "/" + args[0]
	heldMu.Lock()
	defer heldMu.Unlock()
	if l := held[key]; l != nil {
		l.Unlock()
		delete(held, key)
	}
}

// cmdCtr inspects and changes the test engine's containers, so that scripts
// assert on the engine's real state:
//
//	ctr modules MOD...          remove every container of these modules now and when the script ends
//	                            (in the mesh scripts: on the test engine and every host)
//	ctr @HOST SUBCOMMAND ...    any of these on host HOST's engine (the mesh scripts)
//	ctr inspect NAME            print "name=… id=… state=… restart=…" (fails if missing)
//	ctr missing NAME            fail unless NAME does not exist
//	ctr run NAME IMAGE ARG...   create and start an unmanaged container (network none)
//	ctr stop NAME | rm NAME | start NAME | kill NAME
//	ctr wait NAME STATE [DUR]   wait until NAME is in STATE (running, exited, missing)
//	ctr network NAME            print "network=… subnet=… internal=… managed=… module=… containers=…" (fails if missing)
//	ctr nonetwork NAME          fail unless the network NAME does not exist
//	ctr netcreate NAME          create a network meshctl does not manage, removed when the script ends
//	ctr netrun NET NAME IMAGE ARG...  as run, on the network NET; removed when the script ends
func cmdCtr(ts *testscript.TestScript, neg bool, args []string) {
	host, args := scriptHostEngine(ts, args)
	if len(args) < 1 {
		ts.Fatalf("usage: ctr [@HOST] SUBCOMMAND ...")
	}
	c, err := engine.New(host)
	if err != nil {
		ts.Fatalf("%v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	check := func(err error) {
		if neg {
			if err == nil {
				ts.Fatalf("ctr %s: unexpected success", strings.Join(args, " "))
			}
			return
		}
		ts.Check(err)
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "modules":
		// In the mesh scripts, without @HOST: on the test engine and every host.
		engines := []string{host}
		if hosts, err := parseHosts(ts.Getenv("MESHCTL_TEST_HOSTS")); err == nil && host == ts.Getenv("MESHCTL_TEST_DOCKER_HOST") {
			for _, h := range hosts {
				engines = append(engines, h.sock)
			}
		}
		for _, e := range engines {
			c, err := engine.New(e)
			ts.Check(err)
			removeModules(ctx, ts, c, rest)
			c.Close()
			ts.Defer(func() {
				c, err := engine.New(e)
				if err == nil {
					removeModules(context.Background(), ts, c, rest)
					c.Close()
				}
			})
		}
	case "inspect":
		x, err := c.Inspect(ctx, rest[0])
		check(err)
		if err == nil {
			fmt.Fprintf(ts.Stdout(), "name=%s id=%s state=%s restart=%s image=%s\n", x.Name, x.ID, x.State, x.RestartPolicy, x.Image)
		}
	case "missing":
		_, err := c.Inspect(ctx, rest[0])
		if engine.IsNotFound(err) == neg {
			ts.Fatalf("ctr missing %s: err = %v", rest[0], err)
		}
	case "run":
		spec := engine.Spec{Image: rest[1], Cmd: rest[2:], NetworkMode: "none"}
		id, err := c.Create(ctx, rest[0], spec)
		if err == nil {
			err = c.Start(ctx, id)
		}
		check(err)
	case "netrun":
		spec := engine.Spec{Image: rest[2], Cmd: rest[3:], Networks: map[string][]string{rest[0]: nil}}
		id, err := c.Create(ctx, rest[1], spec)
		if err == nil {
			err = c.Start(ctx, id)
			ts.Defer(func() {
				if c, err := engine.New(host); err == nil {
					_ = c.Remove(context.Background(), id)
					c.Close()
				}
			})
		}
		check(err)
	case "network":
		n, err := c.InspectNetwork(ctx, rest[0])
		check(err)
		if err == nil {
			ts.Check(meshrun.PublicSubnets(n))
			fmt.Fprintf(ts.Stdout(), "network=%s subnet=%s internal=%v managed=%v module=%s containers=%s\n", n.Name,
				strings.Join(n.Subnets, ","), n.Internal, n.Labels["io.meshctl.managed"] != "", n.Labels["io.meshctl.module"],
				strings.Join(n.Containers, ","))
		}
	case "nonetwork":
		_, err := c.InspectNetwork(ctx, rest[0])
		if engine.IsNotFound(err) == neg {
			ts.Fatalf("ctr nonetwork %s: err = %v", rest[0], err)
		}
	case "netcreate":
		_, err := c.CreateNetwork(ctx, rest[0], engine.NetworkSpec{})
		check(err)
		name := rest[0]
		if n, err := c.InspectNetwork(ctx, name); err == nil {
			ts.Check(meshrun.PublicSubnets(n))
		}
		ts.Defer(func() {
			if c, err := engine.New(host); err == nil {
				_ = c.RemoveNetwork(context.Background(), name)
				c.Close()
			}
		})
	case "stop":
		check(c.Stop(ctx, rest[0], 5*time.Second))
	case "start":
		check(c.Start(ctx, rest[0]))
	case "kill":
		check(c.Kill(ctx, rest[0]))
	case "rm":
		check(c.Remove(ctx, rest[0]))
	case "wait":
		d := time.Minute
		if len(rest) > 2 {
			d, _ = time.ParseDuration(rest[2])
		}
		deadline := time.Now().Add(d)
		for {
			x, err := c.Inspect(ctx, rest[0])
			st := x.State
			if engine.IsNotFound(err) {
				st = "missing"
			} else if err != nil {
				ts.Fatalf("%v", err)
			}
			if st == rest[1] {
				return
			}
			if time.Now().After(deadline) {
				ts.Fatalf("ctr wait %s %s: still %s after %s", rest[0], rest[1], st, d)
			}
			time.Sleep(100 * time.Millisecond)
		}
	default:
		ts.Fatalf("ctr: unknown subcommand %q", sub)
	}
}

func removeModules(ctx context.Context, ts *testscript.TestScript, c engine.Client, modules []string) {
	for _, m := range modules {
		list, err := c.List(ctx, map[string]string{"io.meshctl.module": m})
		if err != nil {
			ts.Logf("cleanup %s: %v", m, err)
			return
		}
		for _, x := range list {
			_ = c.Remove(ctx, x.ID)
		}
		// Then the module's networks, which only a container kept.
		nets, err := c.Networks(ctx, map[string]string{"io.meshctl.module": m})
		if err != nil {
			ts.Logf("cleanup %s: %v", m, err)
			return
		}
		for _, n := range nets {
			_ = c.RemoveNetwork(ctx, n.ID)
		}
	}
}

// cmdWaitFile waits until a file exists: waitfile PATH [DUR].
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	d := 30 * time.Second
	if len(args) > 1 {
		d, _ = time.ParseDuration(args[1])
	}
	deadline := time.Now().Add(d)
	for {
		_, err := os.Stat(ts.MkAbs(args[0]))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitfile %s: not there after %s", args[0], d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cmdExits runs a program like exec and checks its exact exit status:
// exits CODE PROG ARG... Its stdout and stderr are what the next stdout and
// stderr assertions see.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: exits CODE PROG ARG...")
	}
	var want int
	if _, err := fmt.Sscanf(args[0], "%d", &want); err != nil {
		ts.Fatalf("exits: bad code %q", args[0])
	}
	path, err := lookPath(ts, args[1])
	ts.Check(err)
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	keys := []string{"WORK", "PATH", "TMPDIR", "HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME",
		"DOCKER_HOST", "CI", "MESHCTL_STATE_DIR", "MESHCTL_CONFIG", "MESHCTL_DOCKER_HOST", "MESHCTL_LOCK_TIMEOUT",
		"MESHCTL_OUTPUT", "MESHCTL_QUIET", "MESHCTL_VERBOSE", "MESHCTL_TEST_DOCKER_HOST",
		"MESHCTL_TEST_HOSTS", "MESHCTL_LEDGER", "MESHCTL_LEDGER_USER", "MESHCTL_LEDGER_PASSWORD", "MESHCTL_HOST_NAME", "MESHCTL_METRICS_FILE"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		keys = append(keys, k)
	}
	for _, k := range keys {
		if v := ts.Getenv(k); v != "" {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	fmt.Fprint(ts.Stdout(), stdout.String())
	fmt.Fprint(ts.Stderr(), stderr.String())
	got := 0
	var exitErr *exec.ExitError
	switch {
	case errors.As(err, &exitErr):
		got = exitErr.ExitCode()
	case err != nil:
		ts.Fatalf("exits: %v", err)
	}
	if (got == want) == neg {
		ts.Fatalf("%s exited %d, want %d\nstderr: %s", args[1], got, want, stderr.String())
	}
}

func lookPath(ts *testscript.TestScript, prog string) (string, error) {
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in $PATH", prog)
}

// cmdSigWindow sends a signal (TERM, INT, KILL) to the process of the open
// window on a module, as cron's or an operator's kill would: the pid is the
// one the window recorded in its hold. sigwindow SIGNAL MODULE
func cmdSigWindow(ts *testscript.TestScript, neg bool, args []string) {
	dir, _, args := scriptHost(ts, args)
	if len(args) != 2 {
		ts.Fatalf("usage: sigwindow [@HOST] SIGNAL MODULE")
	}
	sigs := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "HUP": syscall.SIGHUP, "KILL": syscall.SIGKILL}
	sig, ok := sigs[args[0]]
	if !ok {
		ts.Fatalf("sigwindow: unknown signal %q", args[0])
	}
	h := findHold(ts, dir, args[1])
	if h == nil {
		ts.Fatalf("sigwindow: no window holds module %s", args[1])
	}
	ts.Check(syscall.Kill(h.PID, sig))
}

// cmdWaitHold waits until a window on MODULE has recorded its hold and
// stopped its containers (it prints "stopped" once done): waithold MODULE [DUR].
// With !, it waits until no hold on MODULE is recorded.
func cmdWaitHold(ts *testscript.TestScript, neg bool, args []string) {
	dir, sock, args := scriptHost(ts, args)
	if len(args) < 1 {
		ts.Fatalf("usage: waithold [@HOST] MODULE [DUR]")
	}
	d := time.Minute
	if len(args) > 1 {
		d, _ = time.ParseDuration(args[1])
	}
	deadline := time.Now().Add(d)
	for {
		h := findHold(ts, dir, args[0])
		if (h != nil) != neg {
			if neg {
				return
			}
			// The hold is written before the stop: wait for the stop too.
			c, err := engine.New(sock)
			ts.Check(err)
			allStopped := true
			for _, name := range h.Containers {
				x, err := c.Inspect(context.Background(), name)
				if err == nil && x.Running {
					allStopped = false
				}
			}
			c.Close()
			if allStopped {
				return
			}
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waithold %s: not so after %s", args[0], d)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// scriptHost returns the state dir and engine a script command acts on: the
// script's, or with a first argument "@HOST" host HOST's (testdata/mesh),
// and the other arguments.
func scriptHost(ts *testscript.TestScript, args []string) (string, string, []string) {
	if len(args) > 0 && strings.HasPrefix(args[0], "@") {
		sock, rest := scriptHostEngine(ts, args)
		return filepath.Join(ts.Getenv("WORK"), "hosts", args[0][1:], "state"), sock, rest
	}
	return ts.Getenv("MESHCTL_STATE_DIR"), ts.Getenv("MESHCTL_TEST_DOCKER_HOST"), args
}

func findHold(ts *testscript.TestScript, dir, module string) *coord.Hold {
	d, err := state.Open(dir)
	ts.Check(err)
	var doc coord.HoldsDoc
	if _, err := d.Read(coord.HoldsFile, &doc); err != nil {
		ts.Fatalf("%v", err)
	}
	for _, h := range doc.Holds {
		if h.Module == module {
			return &h
		}
	}
	return nil
}

// cmdCapture sets an environment variable from the last command's stdout:
// capture VAR REGEXP sets VAR to the first submatch (or the whole match).
func cmdCapture(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: capture VAR REGEXP")
	}
	re, err := regexp.Compile("(?m)" + args[1])
	ts.Check(err)
	m := re.FindStringSubmatch(ts.ReadFile("stdout"))
	if m == nil {
		ts.Fatalf("capture %s: no match for %s in stdout", args[0], args[1])
	}
	ts.Setenv(args[0], m[len(m)-1])
}

// cmdIDOf prints the engine id of a container, so that a script can tell
// "the same container" from "a new one with the same name":
//
//	idof NAME
//	cp stdout before.id
//	...
//	idof NAME
//	cmp stdout before.id      (same container)   ! cmp stdout before.id   (replaced)
func cmdIDOf(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 || neg {
		ts.Fatalf("usage: idof NAME")
	}
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
	ts.Check(err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	x, err := c.Inspect(ctx, args[0])
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), x.ID)
}

// cmdPidGone waits until the process whose pid is in FILE is gone (a zombie
// counts as gone: it runs nothing): pidgone FILE [DUR], default 2s. With !,
// it checks that the process is alive now, so that "gone" later means
// something.
func cmdPidGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: pidgone FILE [DUR]")
	}
	data, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		ts.Fatalf("pidgone: %s holds no pid: %q", args[0], data)
	}
	if neg {
		if !alive(pid) {
			ts.Fatalf("pidgone: process %d is not running", pid)
		}
		return
	}
	d := 2 * time.Second
	if len(args) > 1 {
		d, err = time.ParseDuration(args[1])
		ts.Check(err)
	}
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			ts.Fatalf("pidgone: process %d still runs after %s", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs (exists and is not a zombie).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) STATE ...; comm may hold spaces and parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// cmdJSONKeys checks the exact set of keys of the object at PATH in the last
// command's stdout, a JSON document: jsonkeys PATH KEY... PATH is dotted,
// with numbers indexing arrays ("windows.0"); "." is the document itself.
func cmdJSONKeys(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || neg {
		ts.Fatalf("usage: jsonkeys PATH KEY...")
	}
	v := jsonAt(ts, args[0])
	obj, ok := v.(map[string]any)
	if !ok {
		ts.Fatalf("jsonkeys: %s is %T, not an object", args[0], v)
	}
	var got []string
	for k := range obj {
		got = append(got, k)
	}
	want := slices.Clone(args[1:])
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		ts.Fatalf("jsonkeys %s: keys %v, want %v", args[0], got, want)
	}
}

// cmdJSONVal checks that the value at PATH in the last stdout matches REGEX:
// jsonval PATH REGEX. Strings are matched as they are, other values as JSON
// (so null, 0, true, [..] and {..} can be matched too). With !, the value
// must not match (a missing PATH is an error either way).
func cmdJSONVal(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jsonval PATH REGEX")
	}
	s := jsonText(jsonAt(ts, args[0]))
	re, err := regexp.Compile(args[1])
	ts.Check(err)
	if re.MatchString(s) == neg {
		ts.Fatalf("jsonval %s: %q; want match %v of %s", args[0], s, !neg, args[1])
	}
}

// cmdJSONCapture sets a variable from a JSON value: jsoncapture VAR PATH.
func cmdJSONCapture(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: jsoncapture VAR PATH")
	}
	ts.Setenv(args[0], jsonText(jsonAt(ts, args[1])))
}

// jsonText is a JSON value as jsonval and jsoncapture read it: a string as
// it is, any other value as JSON.
func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// cmdJSONLen checks the length of the array at PATH: jsonlen PATH N.
func cmdJSONLen(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: jsonlen PATH N")
	}
	want, err := strconv.Atoi(args[1])
	ts.Check(err)
	arr, ok := jsonAt(ts, args[0]).([]any)
	if !ok {
		ts.Fatalf("jsonlen: %s is not an array", args[0])
	}
	if len(arr) != want {
		ts.Fatalf("jsonlen %s: %d, want %d", args[0], len(arr), want)
	}
}

func jsonAt(ts *testscript.TestScript, path string) any {
	out := ts.ReadFile("stdout")
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		ts.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		ts.Fatalf("stdout holds more than one JSON document:\n%s", out)
	}
	if path == "." {
		return doc
	}
	v := doc
	for _, p := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			next, ok := x[p]
			if !ok {
				ts.Fatalf("json: no key %q on the way to %s", p, path)
			}
			v = next
		case []any:
			i, err := strconv.Atoi(p)
			if i < 0 {
				i += len(x) // -1 is the last
			}
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("json: no index %q (length %d) on the way to %s", p, len(x), path)
			}
			v = x[i]
		default:
			ts.Fatalf("json: %q is not inside an object or array on the way to %s", p, path)
		}
	}
	return v
}

// cmdReapWindows (winreap) arranges that, when the script ends, every
// meshctl process this test started for the script (its child, with the
// script's MESHCTL_STATE_DIR) and that still runs is SIGKILLed before the
// cleanups registered earlier run (ctr modules): a failed script's
// background window would otherwise close after the cleanup and bring its
// containers back on the shared engine. Call it right after ctr modules.
func cmdReapWindows(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: winreap")
	}
	mark := "MESHCTL_STATE_DIR=" + ts.Getenv("MESHCTL_STATE_DIR")
	// The mesh scripts' hosts (on HOST …) have state dirs under $WORK/hosts.
	hostMark := "MESHCTL_STATE_DIR=" + filepath.Join(ts.Getenv("WORK"), "hosts") + "/"
	ours := func(kv string) bool { return kv == mark || strings.HasPrefix(kv, hostMark) }
	ts.Defer(func() {
		procs, _ := os.ReadDir("/proc")
		for _, p := range procs {
			pid, err := strconv.Atoi(p.Name())
			// Only our own children: never a process this test did not start.
			if err != nil || parentOf(pid) != os.Getpid() || !alive(pid) {
				continue
			}
			env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			if err != nil || !slices.ContainsFunc(strings.Split(string(env), "\x00"), ours) {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			for deadline := time.Now().Add(5 * time.Second); alive(pid) && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
		}
	})
}

// parentOf returns the parent pid of pid, or 0.
func parentOf(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// cmdWaitHTTP waits until GET URL answers 200: waithttp URL [DUR], default
// 30s. Only loopback addresses are allowed: tests talk to nothing else.
// With !, it checks once that nothing answers (the connection fails).
func cmdWaitHTTP(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waithttp URL [DUR]")
	}
	u, err := url.Parse(args[0])
	ts.Check(err)
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		ts.Fatalf("waithttp: %s is not a loopback address", u.Hostname())
	}
	client := &http.Client{Timeout: 2 * time.Second}
	get := func() (int, error) {
		resp, err := client.Get(args[0])
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if neg {
		if code, err := get(); err == nil {
			ts.Fatalf("waithttp: %s answers %d", args[0], code)
		}
		return
	}
	d := 30 * time.Second
	if len(args) > 1 {
		d, err = time.ParseDuration(args[1])
		ts.Check(err)
	}
	deadline := time.Now().Add(d)
	for {
		code, err := get()
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waithttp %s: not 200 after %s: %d %v", args[0], d, code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// cmdCtrLogs prints what a container wrote to stdout and stderr:
// ctrlogs NAME [DUR]. It follows the logs until the container exits, or for
// DUR at most (default a minute), and prints what it had by then.
func cmdCtrLogs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 || neg {
		ts.Fatalf("usage: ctrlogs NAME [DUR]")
	}
	d := time.Minute
	if len(args) > 1 {
		var err error
		d, err = time.ParseDuration(args[1])
		ts.Check(err)
	}
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
	ts.Check(err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out meshrun.Output
	if err := c.Logs(ctx, args[0], &out); err != nil && ctx.Err() == nil {
		ts.Fatalf("ctrlogs %s: %v", args[0], err)
	}
	fmt.Fprint(ts.Stdout(), out.String())
}

// cmdOldCtr creates and starts the container MODULE.CONTAINER as an older
// meshctl would have: the labels of the state dir $MESHCTL_STATE_DIR, and
// SPEC (JSON, as that meshctl encoded it) as its recorded spec. The engine
// gets the image, command and network SPEC names; restart unless-stopped.
// oldctr MODULE.CONTAINER SPEC
func cmdOldCtr(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: oldctr MODULE.CONTAINER SPEC")
	}
	module, container, ok := strings.Cut(args[0], ".")
	if !ok {
		ts.Fatalf("oldctr: %s is not MODULE.CONTAINER", args[0])
	}
	spec, err := mesh.DecodeSpec(args[1])
	ts.Check(err)
	d, err := state.Open(ts.Getenv("MESHCTL_STATE_DIR"))
	ts.Check(err)
	id, err := d.ID()
	ts.Check(err)
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
	ts.Check(err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cid, err := c.Create(ctx, args[0], engine.Spec{
		Image:       spec.Image,
		Entrypoint:  spec.Entrypoint,
		Cmd:         spec.Command,
		NetworkMode: spec.Network,
		Restart:     mesh.DefaultRestart,
		Labels: map[string]string{
			lifecycle.LabelManaged:   id,
			lifecycle.LabelRole:      lifecycle.RoleService,
			lifecycle.LabelModule:    module,
			lifecycle.LabelContainer: container,
			lifecycle.LabelSpec:      args[1],
		},
	})
	ts.Check(err)
	ts.Check(c.Start(ctx, cid))
}

// cmdWaitMesh: waitmesh [!] HOST MODULE [TIMEOUT] waits until the mesh shows
// (with !: no longer shows) a window of HOST on MODULE, 10s by default.
func cmdWaitMesh(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: waitmesh [!] HOST MODULE [TIMEOUT]")
	}
	d := 10 * time.Second
	if len(args) > 2 {
		d, _ = time.ParseDuration(args[2])
	}
	cfg, err := ledger.ParseURL(ts.Getenv("MESHCTL_LEDGER"))
	ts.Check(err)
	l, err := ledger.OpenEtcd(*cfg)
	ts.Check(err)
	defer l.Close()
	deadline := time.Now().Add(d)
	for {
		ws, err := l.MeshWindows(context.Background())
		ts.Check(err)
		seen := slices.ContainsFunc(ws, func(w ledger.MeshWindow) bool { return w.Host == args[0] && w.Module == args[1] && !w.Lapsed })
		if seen != neg {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("waitmesh: after %s, window of %s on %s seen = %v", d, args[0], args[1], seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
