package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
)

// fltMesh is the module every scenario works on: a service whose graceful
// stop takes GRACE seconds (it traps SIGTERM and sleeps), with a probe
// (PROBE: true or false) run every INTERVAL, and three steps holding it: a run: step, an
// exec: step that writes its start and end (the host's clock, as the
// engine's events use) to MARKS, and a run: step that holds it changed.
const fltMesh = `modules:
  MODULE:
MODFIELDS    containers:
CHAIN      svc:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["CMDLINE"]
        env: {FLTVER: "VERSION"}
        ENVFILE
        labels: {flt.version: "VERSION"}
        volumes: ["TERMDIR:/flt"]
        restart: always
        NETWORK
        SECRET
DEPENDS        stop-grace-period: 20s
        healthcheck: {test: [CMD, PROBE], interval: INTERVAL, timeout: 2s, retries: 3}
SIDE    steps:
      gc:
        while-stopped: [svc]
        run: {command: [sleep, "STEP"]}
      gcx:
        while-stopped: [svc]
        exec: [sh, -c, "date +%s%N >> MARKS; sleep STEP; date +%s%N >> MARKS"]
      gcc:
        while-changed: {svc: {env: {FLTMODE: changed}}}
        run: {command: [sleep, "STEP"]}
`

// fltSide is a second container, never held, whose health gate takes
// SIDEGATE seconds (its probe passes once a file exists); flt.version
// changes it with the service.
const fltSide = `      side:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["sleep SIDEGATE; touch /tmp/ready; exec sleep 100000"]
        labels: {flt.version: "VERSION"}
        network: none
        stop-grace-period: 1s
        healthcheck: {test: [CMD, test, -f, /tmp/ready], interval: 1s, timeout: 2s, retries: 30}
`

// fltServe is the service's command line: it traps SIGTERM, notes it in
// TERMDIR/terms on the host (a stop has begun), and takes GRACE seconds to
// stop; fltCrash crash-loops (exit 3 after 2 s).
const (
	fltServe = "trap 'echo term >> /flt/terms; sleep GRACE; exit 0' TERM; while :; do sleep 1 & wait; done"
	fltCrash = "echo crash; sleep 2; exit 3"
)

// fltVersion is what a mesh file asks for.
type fltVersion struct {
	Version string // the service's flt.version label and VERSION env
	Probe   string // "true" (healthy) or "false" (never healthy)
	Step    string // the steps' seconds
	Grace   string // the service's graceful stop, seconds
	EnvFile string // an env-file path, or ""
	Crash   bool   // the service crash-loops
	Side    string // "" or the health gate's seconds of a second container, side
	// Net puts the service on a module network, back, under the alias
	// api; Internal is that network's internal flag.
	Net, Internal bool
	StartFirst    bool   // the service's update-order is start-first (drain 300ms)
	Secret        string // a secret file's path, mounted in the service, or ""
	Config        string // a config file's path, mounted in the service, or ""
	// Chain puts db and api before the service: it depends on api, which
	// depends on db, each of them versioned as the service is.
	Chain bool
	// Interval is the probes' interval; "" is 1s. A new container's gate
	// is its first probe, so each gate takes about that long.
	Interval string
}

// fltQuick is the probe interval of the scenarios of the newer paths
// (networks, start-first, chains, files): their gates take a third of the
// older ones'. The older scenarios keep 1s, which their fixed findings'
// ordinals were recorded with.
const fltQuick = "300ms"

// fltScenario is one thing the harness does to the host. Its act runs
// meshctl through the proxy (fltRun.via) where faults are to land; a draw
// picks one door (a call the act makes without faults, by method, route
// and ordinal) and a class from classes.
type fltScenario struct {
	name    string
	classes []faultproxy.Class
	setup   func(r *fltRun)
	act     func(r *fltRun)
}

// fltRun is one iteration: a fresh module, what it expects at the end, and
// what the checks need to know of what ran.
type fltRun struct {
	t      *testing.T
	g      *faultRig
	m      *meshctl // the rig's, or one with a state directory of its own
	sc     fltScenario
	seed   uint64
	rng    *rand.Rand
	module string
	dir    string
	file   string
	marks  string
	ver    fltVersion
	rules  []faultproxy.Rule
	// want is the flt.version that must run at the end, finalExit the
	// healing apply's exit status (1 where the file asks for a version
	// that is never healthy: the last good one runs).
	want      string
	finalExit int
	// settle is the healing apply's --settle; "" is 1s.
	settle string
	// calibrating: the run records the doors, without faults.
	calibrating bool
	windows     []fltWindow
	quiet       [][2]time.Time // spans in which the engine must not act on the module
}

// fltWindow is a window that ran: its step and whether it was an exec: one.
type fltWindow struct {
	step string
	exec bool
	// changed says the step holds the service changed: its copy serves
	// through the step by design, never beside the normal one.
	changed bool
}

// needsCalibration reports whether the scenario faults calls and has not
// run yet: its first run, without faults, records the doors later draws
// pick from.
func (g *faultRig) needsCalibration(sc fltScenario) bool {
	return len(sc.classes) > 0 && g.calls[sc.name] == nil
}

// iterate runs one scenario with one seed and checks the host after it.
// Where its doors came from doorsFile and no fault fired, a call the
// file names no longer comes: the scenario calibrates, and runs again.
func (g *faultRig) iterate(t *testing.T, sc fltScenario, seed uint64) {
	g.runs++
	calibrate := g.needsCalibration(sc)
	if g.runOnce(t, sc, seed, calibrate) || calibrate || !g.recorded[sc.name] {
		return
	}
	t.Logf("no fault fired: the recorded doors of %s in %s are stale; it calibrates and runs again. Refresh them: %s", sc.name, doorsFile, doorsRefresh)
	delete(g.recorded, sc.name)
	delete(g.calls, sc.name)
	// The same class's turn again.
	g.cycled--
	g.runOnce(t, sc, seed, true)
	g.runOnce(t, sc, seed, false)
}

// runOnce runs the scenario once, without faults when calibrating, and
// reports whether a fault fired.
func (g *faultRig) runOnce(t *testing.T, sc fltScenario, seed uint64, calibrate bool) bool {
	r := g.newRun(t, sc, seed, calibrate)
	sc.setup(r)
	if !calibrate {
		r.schedule(g.faults)
	}
	t.Logf("seed %d, module %s, faults: %s", seed, r.module, rulesString(r.rules))
	before := len(g.proxy.Calls())
	sc.act(r)
	g.proxy.SetSchedule(nil)
	fired := slices.ContainsFunc(g.proxy.CallsSince(before), func(c faultproxy.Call) bool { return c.Fault != "" })
	if calibrate {
		g.calls[sc.name] = g.proxy.CallsSince(before)
		t.Logf("%d calls to draw faults from: %s", len(g.calls[sc.name]), callList(g.calls[sc.name]))
		if !g.long {
			// The short run keeps to its minute or two: a run without
			// faults is the rest of the suite's business.
			return false
		}
	}
	r.waitStepGone()
	r.verify()
	if t.Failed() {
		t.Logf("the calls of this iteration, its healing apply's included: %s", callList(g.proxy.CallsSince(before)))
	}
	return fired
}

// rulesString names the faults of an iteration.
func rulesString(rules []faultproxy.Rule) string {
	if len(rules) == 0 {
		return "none"
	}
	var parts []string
	for _, x := range rules {
		parts = append(parts, x.String())
	}
	return strings.Join(parts, "; ")
}

// newRun makes an iteration's run: its own module (named from the seed; a
// calibration's name differs from its faulted run's), removed when the
// iteration ends.
func (g *faultRig) newRun(t *testing.T, sc fltScenario, seed uint64, calibrate bool) *fltRun {
	rng := rand.New(rand.NewPCG(seed, 17))
	r := &fltRun{t: t, g: g, m: g.m, sc: sc, seed: seed, rng: rng, dir: t.TempDir(),
		module: fmt.Sprintf("%s%08x", fltPrefix, rng.Uint32()), want: "1"}
	if calibrate {
		r.module += "c"
		r.calibrating = true
	}
	r.file = filepath.Join(r.dir, "mesh.yaml")
	r.marks = filepath.Join(r.dir, "marks")
	r.ver = fltVersion{Version: "1", Probe: "true", Step: "1", Grace: "0.2"}
	r.removeModule(r.module)
	t.Cleanup(func() { r.removeModule(r.module) })
	return r
}

// removeModule removes the module's containers, and a foreign one under
// its service's name.
func (r *fltRun) removeModule(module string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := r.g.m.Eng.List(ctx, map[string]string{"io.meshctl.module": module})
	if err != nil {
		r.t.Logf("remove %s: %v", module, err)
	}
	for _, x := range list {
		_ = r.g.m.Eng.Remove(ctx, x.ID)
	}
	_ = r.g.m.Eng.Remove(ctx, module+".svc")
	nets, err := r.g.m.Eng.Networks(ctx, map[string]string{"io.meshctl.module": module})
	if err != nil {
		r.t.Logf("remove the networks of %s: %v", module, err)
	}
	for _, n := range nets {
		_ = r.g.m.Eng.RemoveNetwork(ctx, n.ID)
	}
}

// schedule draws this iteration's faults (up to faults of them): none
// for a scenario without classes, or the first time a scenario runs (its
// calls are recorded as the doors later draws pick from).
func (r *fltRun) schedule(faults int) {
	r.rules = nil
	doors := r.doors()
	if !r.g.long && len(doors) > 0 {
		r.scheduleCycled(doors)
		return
	}
	for range faults {
		if len(doors) == 0 {
			break
		}
		i := r.rng.IntN(len(doors))
		r.rules = append(r.rules, r.draw(doors[i]))
		// One fault a door: a second rule on it would never fire.
		doors = slices.Delete(doors, i, i+1)
	}
	r.g.proxy.SetSchedule(faultproxy.NewSchedule(r.seed, r.rules...))
}

// scheduleCycled draws one fault of the class whose turn it is (the short
// run takes the classes in turn, so that each is in it), at a drawn door.
func (r *fltRun) scheduleCycled(doors []faultproxy.Call) {
	class := r.sc.classes[r.g.cycled%len(r.sc.classes)]
	r.g.cycled++
	rule := r.draw(doors[r.rng.IntN(len(doors))])
	rule.Class = class
	r.rules = append(r.rules, rule)
	r.g.proxy.SetSchedule(faultproxy.NewSchedule(r.seed, r.rules...))
}

// draw returns a fault for door d, of a drawn class.
func (r *fltRun) draw(d faultproxy.Call) faultproxy.Rule {
	return faultproxy.Rule{Method: d.Method, Route: d.Route, Nth: nth(r.g.calls[r.sc.name], d),
		Class: r.sc.classes[r.rng.IntN(len(r.sc.classes))], Delay: time.Duration(500+r.rng.IntN(2500)) * time.Millisecond}
}

// hangs reports whether a hang is among the faults.
func (r *fltRun) hangs() bool {
	return slices.ContainsFunc(r.rules, func(x faultproxy.Rule) bool { return x.Class == faultproxy.Hang })
}

// doors returns the calls of the scenario's recorded act that a draw may
// fault.
func (r *fltRun) doors() []faultproxy.Call {
	if len(r.sc.classes) == 0 {
		return nil
	}
	var out []faultproxy.Call
	for _, c := range r.g.calls[r.sc.name] {
		if c.Route != "/_ping" && c.Route != "/events" {
			out = append(out, c)
		}
	}
	return out
}

// nth returns the ordinal of call d among the calls of its method and
// route in calls.
func nth(calls []faultproxy.Call, d faultproxy.Call) int {
	n := 0
	for _, c := range calls {
		if c.Method == d.Method && c.Route == d.Route {
			n++
		}
		if c.At.Equal(d.At) && c.Path == d.Path {
			return n
		}
	}
	return n
}

// writeMesh writes the mesh file for v.
func (r *fltRun) writeMesh(v fltVersion) {
	r.ver = v
	envFile := ""
	if v.EnvFile != "" {
		envFile = "env-file: [" + v.EnvFile + "]"
	}
	cmdline := fltServe
	if v.Crash {
		cmdline = fltCrash
	}
	if v.Secret != "" && !v.Crash {
		cmdline = strings.Replace(cmdline, "while", fltSeen+"while", 1)
	}
	side := ""
	if v.Side != "" {
		side = strings.ReplaceAll(fltSide, "SIDEGATE", v.Side)
	}
	// One pass each: a Replacer does not look again at what it put in.
	mesh := strings.NewReplacer("SIDE", side, "CMDLINE", cmdline).Replace(fltMesh)
	if v.Crash {
		// No probe: its gate is --settle, which a crash at 2 s fails when
		// longer; a probe would pass before the first crash.
		mesh = strings.Replace(mesh, "healthcheck: {test: [CMD, PROBE], interval: INTERVAL, timeout: 2s, retries: 3}", "healthcheck: {disable: true}", 1)
	}
	modFields, network, secret := v.paths()
	chain, depends := v.chain()
	mesh = strings.NewReplacer("MODFIELDS", modFields, "NETWORK", network, "SECRET", secret,
		"CHAIN", chain, "DEPENDS", depends).Replace(mesh)
	if v.StartFirst {
		// The old and the new container run together: start-first takes
		// no writable volume. Its terms are not noted.
		mesh = strings.Replace(mesh, `:/flt"]`, `:/flt:ro"]`, 1)
	}
	interval := v.Interval
	if interval == "" {
		interval = "1s"
	}
	mesh = strings.NewReplacer("MODULE", r.module, "VERSION", v.Version, "PROBE", v.Probe, "INTERVAL", interval,
		"STEP", v.Step, "GRACE", v.Grace, "MARKS", r.marks, "ENVFILE", envFile, "TERMDIR", r.termDir()).Replace(mesh)
	if err := os.WriteFile(r.file, []byte(mesh), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// termDir is the host directory the service notes its SIGTERMs in.
func (r *fltRun) termDir() string {
	d := filepath.Join(r.dir, "term")
	if err := os.MkdirAll(d, 0o700); err != nil {
		r.t.Fatal(err)
	}
	return d
}

// applied writes v and applies it without faults; it must succeed.
func (r *fltRun) applied(v fltVersion) {
	r.writeMesh(v)
	if res := r.run(false, "apply", "-f", r.file, "--settle", "1s"); res.code != 0 {
		r.t.Fatalf("setup apply: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	r.want = v.Version
}

// fltResult is how a meshctl process ended.
type fltResult struct {
	code           int // -1 when a signal ended it
	sig            syscall.Signal
	stdout, stderr string
	took           time.Duration
}

// fltProc is a meshctl process the harness runs.
type fltProc struct {
	r        *fltRun
	args     []string
	cmd      *exec.Cmd
	out, err meshrun.Output
	begin    time.Time
	from     int // the proxy's calls before it started
	done     chan struct{}
	waitErr  error
	end      time.Time
	termAt   time.Time // when a signal asked it to end
}

// start starts meshctl args, through the proxy when via.
func (r *fltRun) start(via bool, args ...string) *fltProc {
	if via {
		args = append([]string{"--docker-host", r.g.proxy.Host()}, args...)
	}
	p := &fltProc{r: r, args: args, cmd: r.m.Command(args...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.err
	p.begin, p.from = time.Now(), len(r.g.proxy.Calls())
	if err := p.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	go p.reap()
	return p
}

func (p *fltProc) reap() {
	p.waitErr = p.cmd.Wait()
	p.end = time.Now()
	close(p.done)
}

// run runs meshctl args to its end.
func (r *fltRun) run(via bool, args ...string) fltResult {
	return r.start(via, args...).wait()
}

// fltBudget is how long a command may take before the harness asks it to
// end (SIGTERM): an engine call that hangs may make it wait for ever.
const fltBudget = 90 * time.Second

// fltSignalBound is how soon a command must end after SIGTERM, SIGINT or
// SIGHUP, its cleanup included, on a loaded machine.
const fltSignalBound = 40 * time.Second

// fltHungMargin is how long the short run waits, once a call of the
// process hangs, before it sends SIGTERM: the process is then blocked in
// that call, not on its way to it.
const fltHungMargin = time.Second

// wait waits for the process; past fltBudget (under a hang fault: 8 s in
// the short run, 20 s in the long mode, where a hang may follow other
// faults) it sends SIGTERM, and it checks that a process asked to end
// ended within fltSignalBound. In the short run SIGTERM comes sooner:
// fltHungMargin after a call of this process hung, unless a signal asked
// it to end already.
func (p *fltProc) wait() fltResult {
	budget := fltBudget
	switch {
	case p.r.hangs() && p.r.g.long:
		budget = 20 * time.Second
	case p.r.hangs():
		budget = 8 * time.Second
	}
	bound := time.After(budget)
	var poll <-chan time.Time
	if p.r.hangs() && !p.r.g.long {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		poll = tick.C
	}
wait:
	for {
		select {
		case <-p.done:
			break wait
		case <-bound:
			p.r.t.Logf("meshctl %s still runs after %s: SIGTERM", strings.Join(p.args, " "), budget)
			p.signal(syscall.SIGTERM)
			break wait
		case <-poll:
			if !p.termAt.IsZero() || !p.hung() {
				continue
			}
			poll = nil
			select {
			case <-p.done:
				break wait
			case <-time.After(fltHungMargin):
			}
			p.r.t.Logf("meshctl %s hangs in an engine call: SIGTERM", strings.Join(p.args, " "))
			p.signal(syscall.SIGTERM)
			break wait
		}
	}
	if !p.termAt.IsZero() {
		p.boundedEnd()
	}
	<-p.done
	return p.result()
}

// hung reports whether the proxy hung a call of this process.
func (p *fltProc) hung() bool {
	pid := p.cmd.Process.Pid
	return slices.ContainsFunc(p.r.g.proxy.CallsSince(p.from), func(c faultproxy.Call) bool {
		return c.Fault == faultproxy.Hang && c.PID == pid && !c.At.Before(p.begin)
	})
}

// boundedEnd checks that the process ends within fltSignalBound of the
// signal that asked it to; else it is SIGKILLed.
func (p *fltProc) boundedEnd() {
	select {
	case <-p.done:
		took := p.end.Sub(p.termAt)
		p.r.g.slowestEnd = max(p.r.g.slowestEnd, took)
		if took > fltSignalBound {
			p.r.t.Errorf("meshctl %s ended %s after its signal, want within %s", strings.Join(p.args, " "), took.Round(time.Millisecond), fltSignalBound)
		}
	case <-time.After(time.Until(p.termAt.Add(fltSignalBound))):
		p.r.t.Errorf("meshctl %s still runs %s after its signal: SIGKILL\n%s", strings.Join(p.args, " "), fltSignalBound, p.err.String())
		_ = p.cmd.Process.Kill()
	}
}

// signal sends sig; SIGTERM, SIGINT and SIGHUP ask the process to end.
func (p *fltProc) signal(sig syscall.Signal) {
	p.r.g.signals[signalName(sig)]++
	if sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGHUP {
		p.termAt = time.Now()
	}
	_ = p.cmd.Process.Signal(sig)
}

func (p *fltProc) result() fltResult {
	res := fltResult{stdout: p.out.String(), stderr: p.err.String(), took: p.end.Sub(p.begin)}
	var exit *exec.ExitError
	switch {
	case p.waitErr == nil:
	case errors.As(p.waitErr, &exit):
		res.code = exit.ExitCode()
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.sig = ws.Signal()
		}
	default:
		p.r.t.Fatalf("meshctl %s: %v", strings.Join(p.args, " "), p.waitErr)
	}
	return res
}

// waitFor waits until the process wrote text to stderr; false if it ended
// first or took longer than a minute.
func (p *fltProc) waitFor(text string) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if strings.Contains(p.err.String(), text) {
			return true
		}
		select {
		case <-p.done:
			return strings.Contains(p.err.String(), text)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// waitStepGone waits until no step container of the module runs (a run:
// step outlives a SIGKILLed window; its hold is honoured until it ends).
//
// One that reads created may be a start its SIGKILLed window sent, which
// the engine still carries out (then it runs, and its hold is honoured):
// it is given startInFlight to start before it counts as gone.
func (r *fltRun) waitStepGone() {
	const startInFlight = 5 * time.Second
	begin := time.Now()
	deadline := begin.Add(time.Minute)
	for time.Now().Before(deadline) {
		list, err := r.g.m.Eng.List(r.t.Context(), map[string]string{"io.meshctl.module": r.module, "io.meshctl.role": "step"})
		if err != nil {
			r.t.Fatal(err)
		}
		running := slices.ContainsFunc(list, func(c engine.Container) bool { return c.Running })
		created := slices.ContainsFunc(list, func(c engine.Container) bool { return c.State == "created" })
		if !running && (!created || time.Since(begin) > startInFlight) {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.t.Fatalf("a step container of %s still runs after a minute", r.module)
}

// signalName names sig as kill -l does.
func signalName(sig syscall.Signal) string {
	names := map[syscall.Signal]string{syscall.SIGKILL: "SIGKILL", syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT",
		syscall.SIGHUP: "SIGHUP", syscall.SIGSTOP: "SIGSTOP", syscall.SIGCONT: "SIGCONT", syscall.SIGPIPE: "SIGPIPE"}
	if n, ok := names[sig]; ok {
		return n
	}
	return sig.String()
}

// describe says how the process ended.
func (res fltResult) describe() string {
	if res.sig != 0 {
		return "killed by " + signalName(res.sig)
	}
	return fmt.Sprintf("exit %d", res.code)
}

// callList names calls in order, "METHOD ROUTE" each.
func callList(calls []faultproxy.Call) string {
	var parts []string
	for _, c := range calls {
		if c.Fault != "" {
			parts = append(parts, c.Method+" "+c.Route+" ("+string(c.Fault)+")")
			continue
		}
		parts = append(parts, c.Method+" "+c.Route)
	}
	return strings.Join(parts, ", ")
}
