package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/meshctl/meshctl/pkg/convert"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the scripts run meshctl as a real process: "exec meshctl …"
// runs this test binary as meshctl, and as meshctl-convert (its main's
// body), which meshctl convert runs from PATH.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"meshctl": func() { os.Exit(cli.Main()) },
		"meshctl-convert": func() {
			cli.Converter = convert.Project
			os.Exit(cli.Main())
		},
	})
}

// TestScripts runs testdata/script/*.txtar. Set MESHCTL_UPDATE_SCRIPTS=1 to
// rewrite their golden stdout/stderr files.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("MESHCTL_UPDATE_SCRIPTS") == "1",
		Setup:               setup,
		Condition:           condition,
		Cmds:                cmds,
	})
}

// setup gives each script its own HOME, XDG dirs and state dir under $WORK,
// and points meshctl at the test engine (never the host's default one).
func setup(env *testscript.Env) error {
	work := env.WorkDir
	for k, v := range map[string]string{
		"HOME":              filepath.Join(work, "home"),
		"XDG_CONFIG_HOME":   filepath.Join(work, "home", ".config"),
		"XDG_STATE_HOME":    filepath.Join(work, "home", ".local", "state"),
		"XDG_CACHE_HOME":    filepath.Join(work, "home", ".cache"),
		"MESHCTL_STATE_DIR": filepath.Join(work, "state"),
	} {
		env.Setenv(k, v)
	}
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" {
		// Nothing must reach a real engine by accident: point at nowhere.
		host = "unix://" + filepath.Join(work, "no-engine.sock")
	}
	env.Setenv("DOCKER_HOST", host)
	env.Setenv("MESHCTL_TEST_DOCKER_HOST", host)
	env.Setenv("CI", os.Getenv("CI"))
	// REPO lets a script run the project's own scripts (scripts/engine.sh).
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	env.Setenv("REPO", repo)
	// ENGDIR is where a script may start a private engine of its own (kept
	// short: a unix socket path is limited to 107 bytes). Whatever runs
	// there is stopped when the script ends.
	engdir := filepath.Join(os.TempDir(), fmt.Sprintf("mcs-%d-%d", os.Getpid(), engineSeq.Add(1)))
	env.Setenv("ENGDIR", engdir)
	env.Defer(func() {
		if _, err := os.Stat(filepath.Join(engdir, "dockerd.pid")); err == nil {
			cmd := exec.Command(filepath.Join(repo, "scripts", "engine.sh"), "stop")
			cmd.Env = append(os.Environ(), "MESHCTL_ENGINE_DIR="+engdir, "MESHCTL_TEST_DOCKER_HOST=unix://"+engdir+"/docker.sock")
			_ = cmd.Run()
		}
		_ = os.RemoveAll(engdir)
	})
	return nil
}

// engineSeq numbers the scripts' own engine directories.
var engineSeq atomic.Int64

var (
	engineOnce sync.Once
	engineErr  error
)

// condition knows [engine] (the test engine answers) and [root]; any other
// name is an error, not a silent false.
func condition(cond string) (bool, error) {
	switch cond {
	case "engine":
		engineOnce.Do(func() { engineErr = pingTestEngine() })
		if engineErr != nil && os.Getenv("CI") == "true" {
			return false, fmt.Errorf("CI=true and the test engine does not answer: %v", engineErr)
		}
		return engineErr == nil, nil
	case "root":
		return os.Geteuid() == 0, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

func pingTestEngine() error {
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" {
		return errors.New("MESHCTL_TEST_DOCKER_HOST is not set (scripts/engine.sh start)")
	}
	c, err := engine.New(host)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Ping(ctx)
}

var cmds = map[string]func(ts *testscript.TestScript, neg bool, args []string){
	"ctr":       cmdCtr,
	"waitfile":  cmdWaitFile,
	"lock":      cmdLock,
	"exits":     cmdExits,
	"capture":   cmdCapture,
	"sigwindow": cmdSigWindow,
	"waithold":  cmdWaitHold,
	"unlock":    cmdUnlock,
	"idof":      cmdIDOf,
	"pidgone":   cmdPidGone,
	"jsonkeys":  cmdJSONKeys,
	"jsonval":   cmdJSONVal,
	"jsonlen":   cmdJSONLen,
	"winreap":   cmdReapWindows,
	"waithttp":  cmdWaitHTTP,
	"ctrlogs":   cmdCtrLogs,
	"oldctr":    cmdOldCtr,
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
//	ctr inspect NAME            print "name=… id=… state=… restart=…" (fails if missing)
//	ctr missing NAME            fail unless NAME does not exist
//	ctr run NAME IMAGE ARG...   create and start an unmanaged container (network none)
//	ctr stop NAME | rm NAME | start NAME | kill NAME
//	ctr wait NAME STATE [DUR]   wait until NAME is in STATE (running, exited, missing)
func cmdCtr(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: ctr SUBCOMMAND ...")
	}
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
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
		removeModules(ctx, ts, c, rest)
		ts.Defer(func() {
			c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
			if err == nil {
				removeModules(context.Background(), ts, c, rest)
				c.Close()
			}
		})
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
		"MESHCTL_LEDGER", "MESHCTL_LEDGER_USER", "MESHCTL_LEDGER_PASSWORD", "MESHCTL_HOST_NAME"}
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
	sigs := map[string]syscall.Signal{"TERM": syscall.SIGTERM, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL}
	sig, ok := sigs[args[0]]
	if !ok {
		ts.Fatalf("sigwindow: unknown signal %q", args[0])
	}
	h := findHold(ts, args[1])
	if h == nil {
		ts.Fatalf("sigwindow: no window holds module %s", args[1])
	}
	ts.Check(syscall.Kill(h.PID, sig))
}

// cmdWaitHold waits until a window on MODULE has recorded its hold and
// stopped its containers (it prints "stopped" once done): waithold MODULE [DUR].
// With !, it waits until no hold on MODULE is recorded.
func cmdWaitHold(ts *testscript.TestScript, neg bool, args []string) {
	d := time.Minute
	if len(args) > 1 {
		d, _ = time.ParseDuration(args[1])
	}
	deadline := time.Now().Add(d)
	for {
		h := findHold(ts, args[0])
		if (h != nil) != neg {
			if neg {
				return
			}
			// The hold is written before the stop: wait for the stop too.
			c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
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

func findHold(ts *testscript.TestScript, module string) *holds.Hold {
	d, err := state.Open(ts.Getenv("MESHCTL_STATE_DIR"))
	ts.Check(err)
	var doc holds.Doc
	if _, err := d.Read(holds.File, &doc); err != nil {
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
