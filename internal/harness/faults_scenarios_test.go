package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
)

// allClasses are the proxy's fault classes.
var allClasses = faultproxy.Classes

// faultScenarios are the scenarios of TestFaults. Each holds on today's
// code at every door, with every class of fault and every signal (the
// doors that led to known findings are fixed: see fixedFindings).
var faultScenarios = []fltScenario{
	{name: "apply-create", classes: allClasses, setup: noSetup, act: actApply},
	{name: "apply-recreate", classes: allClasses, setup: v1, act: actRecreate},
	{name: "apply-putback", classes: allClasses, setup: v1, act: actPutBack},
	{name: "window-run", classes: allClasses, setup: v1, act: actWindow("gc")},
	{name: "window-exec", classes: allClasses, setup: v1, act: actWindow("gcx")},
	{name: "window-changed", classes: allClasses, setup: v1, act: actWindow("gcc")},
	{name: "window-deferred", classes: allClasses, setup: v1, act: actDeferred},
	{name: "stale-release", classes: allClasses, setup: v1, act: actStaleRelease},
	{name: "status", classes: allClasses, setup: v1, act: actStatus},
	{name: "signal-window", setup: slowV1, act: actSignalWindow},
	{name: "signal-apply", setup: slowV1, act: actSignalApply},
	{name: "closed-stdout", setup: v1, act: actClosedStdout},
	{name: "concurrent", setup: v1, act: actConcurrent},
	{name: "state-enospc", setup: setupTinyState, act: actFullState},
	{name: "startfirst-recreate", classes: allClasses, setup: netV1(true), act: actStartFirst},
	{name: "startfirst-window", classes: allClasses, setup: netV1(true), act: actWindow("gc")},
	{name: "network-replace", classes: allClasses, setup: netV1(false), act: actNetworkReplace},
	{name: "depends-chain", classes: allClasses, setup: chainV1, act: actChain},
	{name: "files-vanish-apply", classes: allClasses, setup: filesV1, act: actFileVanishesInApply},
	{name: "window-deferred-files", classes: allClasses, setup: filesV1, act: actDeferredFiles},
}

// noSetup writes version 1's file and applies nothing.
func noSetup(r *fltRun) {
	r.writeMesh(r.ver)
}

// v1 applies the first, healthy version.
func v1(r *fltRun) { r.applied(r.ver) }

// slowV1 applies a first version whose graceful stop takes 3 s, long
// enough for a signal to land in it.
func slowV1(r *fltRun) {
	v := r.ver
	v.Grace, v.Step = "3", "2"
	r.applied(v)
}

// actApply creates the service through the proxy.
func actApply(r *fltRun) {
	r.run(true, "apply", "-f", r.file, "--settle", "1s")
}

// actRecreate replaces version 1 by a healthy version 2 through the proxy.
// Once the apply returns, whatever failed, no NAME.meshctl-* runs.
func actRecreate(r *fltRun) {
	v := r.ver
	v.Version = "2"
	r.writeMesh(v)
	if res := r.run(true, "apply", "-f", r.file, "--settle", "1s"); res.sig == 0 {
		r.checkAfterApply("after an apply that exited " + strconv.Itoa(res.code))
	}
	r.want = "2"
}

// actPutBack tries a version 2 that never becomes healthy through the
// proxy: the old version must be put back; the healing apply fails the
// same way (exit 1) and leaves version 1 running.
func actPutBack(r *fltRun) {
	v := r.ver
	v.Version, v.Probe = "2", "false"
	r.writeMesh(v)
	r.run(true, "apply", "-f", r.file, "--settle", "1s")
	r.finalExit = 1
}

// actWindow runs a window of step through the proxy.
func actWindow(step string) func(r *fltRun) {
	return func(r *fltRun) {
		r.windows = append(r.windows, fltWindow{step: step, exec: step == "gcx", changed: step == "gcc"})
		if res := r.run(true, "window", "run", r.module, step, "-f", r.file, "--settle", "1s"); res.code == 0 {
			r.checkServiceRuns("after a window that exited 0")
		}
	}
}

// actDeferred runs a window through the proxy; mid-step an apply without
// faults changes the held service (deferred), which the close carries out.
func actDeferred(r *fltRun) {
	v := r.ver
	v.Step = "5"
	r.writeMesh(v)
	r.windows = append(r.windows, fltWindow{step: "gc"})
	p := r.start(true, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	p.waitFor("step gc started")
	v.Version = "2"
	r.writeMesh(v)
	// A window whose engine call hangs under the state lock keeps every
	// other command waiting for the lock (fail closed): the apply then ends
	// by the harness's SIGTERM, as its budget runs out, and the healing
	// apply carries out the change.
	res := r.run(false, "apply", "-f", r.file, "--settle", "1s", "-o", "json")
	if res.code != 0 && !(r.hangs() && res.code == 130) {
		r.t.Errorf("the mid-window apply exited %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	deferred := reported(res.stdout, r.module+".svc") == "deferred"
	r.want = "2"
	if res := p.wait(); res.code == 0 {
		r.checkServiceRuns("after a window that exited 0")
		// What an apply reported deferred is what runs after the close.
		if x := r.inspect(r.module + ".svc"); deferred && x.Labels["flt.version"] != "2" {
			r.t.Errorf("after a close that exited 0 %s is version %q, and the mid-window apply reported version 2 deferred", x.Name, x.Labels["flt.version"])
		}
	}
}

// actStaleRelease SIGKILLs a window mid-step, then applies through the
// proxy once its step container has ended: the apply releases the stale
// hold.
func actStaleRelease(r *fltRun) {
	r.windows = append(r.windows, fltWindow{step: "gc"})
	p := r.start(false, "window", "run", r.module, "gc", "-f", r.file)
	p.waitFor("step gc started")
	p.signal(syscall.SIGKILL)
	p.wait()
	r.waitStepGone()
	r.run(true, "apply", "-f", r.file, "--settle", "1s")
}

// actStatus runs status and status --check through the proxy: whatever the
// engine does to their calls, they change nothing.
func actStatus(r *fltRun) {
	begin := time.Now()
	r.run(true, "status")
	r.run(true, "status", "--check", "-o", "json")
	r.quiet = append(r.quiet, [2]time.Time{begin, time.Now()})
}

// fltSignals are the signals the signal scenarios draw from; SIGSTOP is
// followed by SIGCONT.
var fltSignals = []syscall.Signal{syscall.SIGKILL, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGSTOP}

// signalAt starts meshctl args, sends a drawn signal at a drawn instant of
// [0, span), and waits for it to end.
func (r *fltRun) signalAt(sigs []syscall.Signal, span time.Duration, args ...string) {
	sig := sigs[r.rng.IntN(len(sigs))]
	delay := time.Duration(r.rng.Int64N(int64(span)))
	r.t.Logf("%s after %s", signalName(sig), delay.Round(time.Millisecond))
	p := r.start(false, args...)
	select {
	case <-p.done:
	case <-time.After(delay):
		p.signal(sig)
		if sig == syscall.SIGSTOP {
			time.Sleep(time.Duration(200+r.rng.IntN(2000)) * time.Millisecond)
			p.signal(syscall.SIGCONT)
		}
	}
	res := p.wait()
	r.t.Logf("%s after %s", res.describe(), res.took.Round(time.Millisecond))
	switch {
	case res.sig != syscall.SIGTERM && res.sig != syscall.SIGINT && res.sig != syscall.SIGHUP:
	case delay < fltStartup:
		// Before its signal handler is in place (the Go runtime and the
		// packages' initialisation come first), a signal ends any Go
		// program; nothing was opened yet, and the host is checked after.
		r.t.Logf("%s came %s after the start, before meshctl handles signals", signalName(sig), delay)
	default:
		// Asked to end, meshctl closes what it opened and exits 130; it
		// is not killed by the signal (SIGHUP included: see sighup-window).
		r.t.Errorf("meshctl %s was %s, want it to clean up and exit", strings.Join(p.args, " "), res.describe())
	}
}

// fltStartup bounds how long meshctl takes, from its exec, to handle
// SIGTERM, SIGINT and SIGHUP: the Go runtime, then the initialisation of
// its packages (about 7 ms unloaded), then main. The long run saw a SIGTERM
// 1 ms after the start end the window by the signal (seed 39055).
const fltStartup = 50 * time.Millisecond

// actSignalWindow signals a window (a 3 s graceful stop, a 2 s run: step)
// at a drawn instant of its life.
func actSignalWindow(r *fltRun) {
	r.windows = append(r.windows, fltWindow{step: "gc"})
	r.signalAt(fltSignals, 10*time.Second, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
}

// actSignalApply signals an apply replacing version 1 (a 3 s graceful
// stop) by version 2 at a drawn instant of its life.
func actSignalApply(r *fltRun) {
	v := r.ver
	v.Version = "2"
	r.writeMesh(v)
	r.want = "2"
	r.signalAt(fltSignals, 8*time.Second, "apply", "-f", r.file, "--settle", "1s")
}

// actClosedStdout runs a window and an apply whose stdout and stderr
// nobody reads (a closed pipe: SIGPIPE): both carry on to the end.
func actClosedStdout(r *fltRun) {
	r.windows = append(r.windows, fltWindow{step: "gcx", exec: true})
	for _, args := range [][]string{
		{"window", "run", r.module, "gcx", "-f", r.file, "--settle", "1s"},
		{"apply", "-f", r.file, "--settle", "1s", "-o", "json"},
	} {
		if code := r.runClosedOutput(args...); code != 0 {
			r.t.Errorf("meshctl %s with a closed stdout: exit %d, want 0", strings.Join(args, " "), code)
		}
	}
	r.g.signals["SIGPIPE"]++
}

// runClosedOutput runs meshctl with stdout and stderr pipes whose readers
// are gone, and returns its exit status (-1 if a signal ended it).
func (r *fltRun) runClosedOutput(args ...string) int {
	cmd := r.m.Command(args...)
	outR, outW, err := os.Pipe()
	if err != nil {
		r.t.Fatal(err)
	}
	outR.Close()
	defer outW.Close()
	cmd.Stdout, cmd.Stderr = outW, outW
	err = cmd.Run()
	if cmd.ProcessState == nil {
		r.t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode()
}

// actConcurrent runs two applies and two windows at once through a proxy
// that delays a fifth of the calls.
func actConcurrent(r *fltRun) {
	r.g.proxy.SetSchedule(faultproxy.NewSchedule(r.seed, faultproxy.Rule{Prob: 0.2, Class: faultproxy.Delay, Delay: 300 * time.Millisecond}))
	r.windows = append(r.windows, fltWindow{step: "gc"}, fltWindow{step: "gcx", exec: true})
	var procs []*fltProc
	for _, args := range [][]string{
		{"apply", "-f", r.file, "--settle", "1s"},
		{"window", "run", r.module, "gc", "-f", r.file, "--settle", "1s", "--wait", "2m"},
		{"apply", "-f", r.file, "--settle", "1s"},
		{"window", "run", r.module, "gcx", "-f", r.file, "--settle", "1s", "--wait", "2m"},
	} {
		procs = append(procs, r.start(true, args...))
	}
	for _, p := range procs {
		if res := p.wait(); res.code != 0 {
			r.t.Errorf("meshctl %s: exit %d\n%s%s", strings.Join(p.args, " "), res.code, res.stdout, res.stderr)
		}
	}
}

// writeEnvFile writes an env-file for a module and returns its path.
func (r *fltRun) writeEnvFile(name string) string {
	p := filepath.Join(r.dir, name)
	if err := os.WriteFile(p, []byte("SECRET="+strconv.Itoa(r.rng.IntN(1e6))+"\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return p
}
