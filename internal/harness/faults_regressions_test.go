package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
)

// fltKnown is a finding of the harness: a scenario and a fault (or a
// signal, or an environment fault) that breaks a property today. Each
// fails until its bug is fixed; then it is a regression test.
type fltKnown struct {
	what string
	seed uint64
	sc   fltScenario
	// rule is the fault the proxy injects into the act's calls, if any;
	// more are further ones, beside it.
	rule *faultproxy.Rule
	more []faultproxy.Rule
}

// knownFindings are the harness's findings on today's code
// (MESHCTL_FAULTS_KNOWN=1 replays them; every one fails while its bug
// lives). The seed fixes the module name and every draw of the act.
var knownFindings = []fltKnown{}

// fixedFindings are known findings whose bug is fixed: regression tests,
// replayed by every run of TestFaults (the short run included). Each failed
// while its bug lived.
var fixedFindings = []fltKnown{
	{seed: 2702, what: "the held service's secret is a FIFO at the close: the close said it brought the service back as it was, and started the held container, which bound the FIFO; once the file was back, apply called it unchanged, and it ran without its secret's content",
		sc: fltScenario{name: "secret-fifo-at-close", setup: filesV1, act: actSecretReplacedInWindow("a FIFO")}},
	{seed: 1701, what: "a close's deferred recreate whose remove of the old container fails: new and .meshctl-old both run",
		sc: fltScenario{name: "window-deferred", setup: v1, act: actDeferred},
		// The window's first remove is its step container's; the second,
		// the old container's once the new one passed its health gate.
		rule: &faultproxy.Rule{Method: "DELETE", Route: "/containers/{id}", Nth: 2, Class: faultproxy.Fail}},
	{seed: 1702, what: "an apply's put-back whose remove of the new, unhealthy container fails: the old one runs aside beside it",
		sc:   fltScenario{name: "apply-putback", setup: v1, act: actPutBack},
		rule: &faultproxy.Rule{Method: "DELETE", Route: "/containers/{id}", Nth: 1, Class: faultproxy.Fail}},
	{seed: 25099, what: "a rename aside whose answer is lost (the engine did it): the put-back started the old one under the aside name, and the next apply created the service beside it",
		sc:   fltScenario{name: "apply-recreate", setup: v1, act: actRecreate},
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/rename", Nth: 1, Class: faultproxy.Drop}},
	{seed: 1703, what: "a window SIGKILLed in its close's health gate of a deferred, unhealthy version: the next apply keeps the unverified one",
		sc: fltScenario{name: "window-deferred-kill", setup: v1, act: actDeferredKilledInGate}},
	{seed: 1713, what: "a window SIGKILLed in its close's deferred recreate once the new container ran under its temporary name, before the renames: the stale release started the held one beside it (CI, seed 1 of the short run)",
		sc:   fltScenario{name: "window-deferred-unrenamed", setup: v1, act: actDeferredKilledUnrenamed},
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/rename", Nth: 1, Class: faultproxy.Delay, Delay: 3 * time.Second}},
	{seed: 1704, what: "an apply killed in a health gate leaves a dead claim; a window holds the unverified container; a mid-window apply drops the claim: the old one is never put back",
		sc: fltScenario{name: "dead-claim-held", setup: v1, act: actDeadClaimHeld}},
	{seed: 1712, what: "a window closes while the apply that deferred a change to its held container waits for another container's health gate: the change is lost",
		sc: fltScenario{name: "deferred-lost", setup: sideV1, act: actDeferredLost}},
	{seed: 1705, what: "a window SIGTERMed while its open waits out a graceful stop: the service stays exited",
		sc: fltScenario{name: "signal-window-stop", setup: slowV1, act: actSignalInStop(syscall.SIGTERM, true)}},
	{seed: 1706, what: "an apply SIGINTed during the old container's graceful stop: no container of the service runs",
		sc: fltScenario{name: "signal-apply-stop", setup: slowV1, act: actSignalInStop(syscall.SIGINT, false)}},
	{seed: 1711, what: "an apply killed in a create's health gate of a crash-looping container: later applies call it unchanged",
		sc: fltScenario{name: "crashloop-killed-create", setup: noSetup, act: actCrashLoopKilled}},
	{seed: 1710, what: "an engine call that hangs in a stale release: the apply outlasted its SIGTERM by a minute",
		sc:   fltScenario{name: "stale-release-hang", setup: v1, act: actStaleRelease},
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/update", Nth: 1, Class: faultproxy.Hang}},
	{seed: 4039, what: "the close's start of the held container hangs, and SIGTERM comes during it: the window outlived its signal by minutes",
		sc:   fltScenario{name: "window-exec", setup: v1, act: actWindow("gcx")},
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/start", Nth: 1, Class: faultproxy.Hang}},
	{seed: 4003, what: "the removal of the exited step container hangs, and SIGTERM comes during it: the window outlived its signal by minutes",
		sc:   fltScenario{name: "window-run", setup: v1, act: actWindow("gc")},
		rule: &faultproxy.Rule{Method: "DELETE", Route: "/containers/{id}", Nth: 1, Class: faultproxy.Hang}},
	{seed: 5151, what: "a recreate after a network replace whose rename aside fails; its put-back's lookup of the old container hangs, twice, and SIGTERM comes during it: the apply exited 130 with the service stopped (long run)",
		sc: fltScenario{name: "network-replace-putback-hang", setup: netV1(false), act: actNetworkReplaceSignalled},
		// The recreate's first rename (aside) fails. Its lookups by the
		// aside name are the first two inspects; the put-back's lookup
		// of the old container by its ID is the third, and hangs, and so
		// does the next one.
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/rename", Nth: 1, Class: faultproxy.Fail},
		more: []faultproxy.Rule{
			{Method: "GET", Route: "/containers/{id}/json", Nth: 3, Class: faultproxy.Hang},
			{Method: "GET", Route: "/containers/{id}/json", Nth: 4, Class: faultproxy.Hang}}},
	{seed: 19, what: "a secret removed between an apply's plan and its start of the new container: the engine made an empty directory in its place, bound it, and the apply said ok; later applies said unchanged (short run, files-vanish-apply)",
		sc:   fltScenario{name: "secret-removed-before-start", setup: filesV1, act: actFileRemovedBeforeStart},
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/start", Nth: 1, Class: faultproxy.Delay, Delay: 2 * time.Second}},
	{seed: 62012, what: "a recreate's rename of the new container to its name fails; its put-back's removal of the new one hangs, and SIGTERM comes during it: the new one ran as NAME.meshctl-new, the old one stopped aside, nothing under the name (long run, files-vanish-apply)",
		sc:   fltScenario{name: "putback-remove-fails", setup: v1, act: actRecreate},
		rule: &faultproxy.Rule{Method: "POST", Route: "/containers/{id}/rename", Nth: 2, Class: faultproxy.Fail},
		// Both tries of one removal fail, as both did once the hang had
		// spent their context; failures keep the replay short. The hang and
		// the signal: TestPutBackRemovesAgainAfterAHang.
		more: []faultproxy.Rule{
			{Method: "DELETE", Route: "/containers/{id}", Nth: 1, Class: faultproxy.Fail},
			{Method: "DELETE", Route: "/containers/{id}", Nth: 2, Class: faultproxy.Fail}}},
	{seed: 1707, what: "a foreign container under the held name: the window runs its step with it up",
		sc: fltScenario{name: "foreign-held", setup: v1, act: actForeignHeld}},
	{seed: 1708, what: "another module's env-file vanishes mid-window: the close exits 2 and brings nothing back",
		sc: fltScenario{name: "envfile-vanishes", setup: v1, act: actEnvFileVanishes}},
	{seed: 1709, what: "SIGHUP (an SSH disconnect) kills a window without closing it",
		sc: fltScenario{name: "sighup-window", setup: slowV1, act: actSighupWindow}},
}

// testFixedFindings replays fixedFindings; each must hold.
func testFixedFindings(t *testing.T, rig *faultRig) {
	for _, k := range fixedFindings {
		t.Run("fixed-"+k.sc.name, func(t *testing.T) {
			t.Logf("seed %d, fixed: %s", k.seed, k.what)
			rig.replay(t, k)
		})
	}
}

// testKnownFindings replays knownFindings.
func testKnownFindings(t *testing.T) {
	host := meshrun.TestEngine(t)
	rig := newFaultRig(t, host)
	defer rig.report()
	for _, k := range knownFindings {
		t.Run(k.sc.name, func(t *testing.T) {
			t.Logf("seed %d: %s", k.seed, k.what)
			rig.replay(t, k)
		})
	}
}

// replay runs a known finding's scenario with its fault and checks the host.
func (g *faultRig) replay(t *testing.T, k fltKnown) {
	g.runs++
	r := g.newRun(t, k.sc, k.seed, false)
	k.sc.setup(r)
	if k.rule != nil {
		r.rules = append([]faultproxy.Rule{*k.rule}, k.more...)
		g.proxy.SetSchedule(faultproxy.NewSchedule(k.seed, r.rules...))
	}
	t.Logf("module %s, faults: %s", r.module, rulesString(r.rules))
	k.sc.act(r)
	g.proxy.SetSchedule(nil)
	r.waitStepGone()
	r.verify()
}

// actDeferredKilledInGate defers a version that never becomes healthy
// during a window and SIGKILLs the window while its close waits for the
// new container's health: the next apply must put the last good one back.
func actDeferredKilledInGate(r *fltRun) {
	p := r.deferUnhealthy(false)
	if p.waitFor("recreating ") {
		time.Sleep(500 * time.Millisecond)
		p.signal(syscall.SIGKILL)
	}
	p.wait()
}

// actDeferredKilledUnrenamed is actDeferredKilledInGate with the kill as
// soon as the close's recreate has started the new container under its
// temporary name: the rule delays the window's first rename (its close's
// recreate's, the window talking to the engine through the proxy), so the
// kill lands before the renames.
func actDeferredKilledUnrenamed(r *fltRun) {
	since := time.Now()
	p := r.deferUnhealthy(true)
	if r.waitEvent("start", r.module+".svc.meshctl-new", since) {
		p.signal(syscall.SIGKILL)
	}
	p.wait()
}

// deferUnhealthy starts a window (through the proxy, via) whose step takes
// 4 s, and, mid-step, applies a version 2 that never becomes healthy: the
// apply defers it, and the window's close will recreate the service. It
// returns the window; the healing apply fails on version 2 (exit 1).
func (r *fltRun) deferUnhealthy(via bool) *fltProc {
	v := r.ver
	v.Step = "4"
	r.writeMesh(v)
	r.windows = append(r.windows, fltWindow{step: "gc"})
	p := r.start(via, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	p.waitFor("step gc started")
	v.Version, v.Probe = "2", "false"
	r.writeMesh(v)
	r.run(false, "apply", "-f", r.file, "--settle", "1s")
	r.finalExit = 1
	return p
}

// actSignalInStop signals a window (or an apply replacing version 1 by 2)
// half a second after the held (or old) container got the SIGTERM of its
// 3 s graceful stop, as the container notes it in its terms file.
func actSignalInStop(sig syscall.Signal, window bool) func(r *fltRun) {
	return func(r *fltRun) {
		args := []string{"window", "run", r.module, "gc", "-f", r.file, "--settle", "1s"}
		if window {
			r.windows = append(r.windows, fltWindow{step: "gc"})
		} else {
			v := r.ver
			v.Version = "2"
			r.writeMesh(v)
			r.want = "2"
			args = []string{"apply", "-f", r.file, "--settle", "1s"}
		}
		p := r.start(false, args...)
		if r.waitTerm(p) {
			time.Sleep(500 * time.Millisecond)
			p.signal(sig)
		}
		res := p.wait()
		r.t.Logf("%s: %s\n%s", signalName(sig), res.describe(), res.stderr)
		// The engine's stop was in flight: once it is over (the engine's
		// die event), the service must run again.
		r.waitEvent("die", r.module+".svc", p.termAt)
		r.checkServiceRuns("after the signalled " + args[0] + " and the stop it left in flight")
	}
}

// waitTerm waits until the service notes a SIGTERM; false if p ended first.
func (r *fltRun) waitTerm(p *fltProc) bool {
	for {
		if _, err := os.Stat(filepath.Join(r.termDir(), "terms")); err == nil {
			return true
		}
		select {
		case <-p.done:
			r.t.Logf("the service got no SIGTERM while meshctl %s ran", strings.Join(p.args, " "))
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// actForeignHeld replaces the service by a container started by hand
// (no meshctl labels) under its name, runs a window that holds it, then
// removes the foreign container so that the healing apply can converge.
func actForeignHeld(r *fltRun) {
	name := r.module + ".svc"
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	_ = r.g.m.Eng.Remove(ctx, name)
	id, err := r.g.m.Eng.Create(ctx, name, engine.Spec{Image: "meshtest/busybox:1", Cmd: []string{"sleep", "300"}, NetworkMode: "none"})
	if err == nil {
		err = r.g.m.Eng.Start(ctx, id)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.windows = append(r.windows, fltWindow{step: "gc"})
	res := r.run(false, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	r.t.Logf("window run with a foreign %s: %s\n%s", name, res.describe(), res.stderr)
	_ = r.g.m.Eng.Remove(ctx, name)
}

// actEnvFileVanishes runs a window on the module while the env-file of
// another module goes missing (a secret rotation renames it): the window
// must close as usual; the other module is not its business.
func actEnvFileVanishes(r *fltRun) {
	other := fltRun{t: r.t, g: r.g, m: r.m, rng: r.rng, dir: r.dir, module: r.module + "b", ver: r.ver}
	other.file, other.marks = r.dir+"/other.yaml", r.dir+"/other-marks"
	r.removeModule(other.module)
	r.t.Cleanup(func() { r.removeModule(other.module) })
	v := other.ver
	v.EnvFile = other.writeEnvFile("other.env")
	other.applied(v)
	w := r.ver
	w.Step = "3"
	r.writeMesh(w)
	r.windows = append(r.windows, fltWindow{step: "gc"})
	p := r.start(false, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	p.waitFor("step gc started")
	if err := os.Rename(v.EnvFile, v.EnvFile+".rotating"); err != nil {
		r.t.Fatal(err)
	}
	res := p.wait()
	r.t.Logf("window run: %s\n%s", res.describe(), res.stderr)
	if res.code != 0 {
		r.t.Errorf("the window exited %d while another module's env-file was missing, want 0", res.code)
	}
	r.checkServiceRuns("after the window")
	if err := os.Rename(v.EnvFile+".rotating", v.EnvFile); err != nil {
		r.t.Fatal(err)
	}
	// The state directory outlives this run: a module whose env-file goes
	// with the run's directory would blind every later one (see envfile-vanishes).
	if res := r.run(false, "apply", "--remove-module", other.module); res.code != 0 {
		r.t.Fatalf("apply --remove-module %s: %s\n%s", other.module, res.describe(), res.stderr)
	}
}

// actSighupWindow sends SIGHUP to a window mid-step: like SIGTERM, it must
// close the window (exit 130), not kill it.
func actSighupWindow(r *fltRun) {
	r.windows = append(r.windows, fltWindow{step: "gc"})
	p := r.start(false, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	if p.waitFor("step gc started") {
		p.signal(syscall.SIGHUP)
	}
	res := p.wait()
	r.t.Logf("SIGHUP mid-step: %s\n%s", res.describe(), res.stderr)
	if res.sig != 0 {
		r.t.Errorf("SIGHUP mid-step: the window was %s, want it closed (exit 130)", res.describe())
	}
	r.checkServiceRuns("after the SIGHUPed window")
}

// checkServiceRuns checks, before any healing apply, that the module's
// services run (not restarting) with their restart policy.
func (r *fltRun) checkServiceRuns(when string) {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	for _, name := range r.services() {
		x, err := r.g.m.Eng.Inspect(ctx, name)
		if err != nil {
			r.t.Errorf("%s: %v", when, err)
			continue
		}
		if x.State != "running" || x.Restarting || x.RestartPolicy != "always" {
			r.t.Errorf("%s %s is %s (exit %d) with restart policy %q, want running with always", when, x.Name, x.State, x.ExitCode, x.RestartPolicy)
		}
	}
}

// waitEvent waits up to a minute for the engine's event action on the
// container name since the instant given; false if it did not come.
func (r *fltRun) waitEvent(action, name string, since time.Time) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, e := range r.g.rec.Events() {
			if e.Action == action && e.Name == name && !e.At.Before(since) {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.t.Logf("no %s event of %s", action, name)
	return false
}

// killInGate starts an apply of the file and SIGKILLs it once it has been
// creating or recreating (its health gate) for a second.
func (r *fltRun) killInGate(settle string) {
	p := r.start(false, "apply", "-f", r.file, "--settle", settle)
	if p.waitFor("creating ") {
		time.Sleep(time.Second)
		p.signal(syscall.SIGKILL)
	}
	res := p.wait()
	r.t.Logf("apply killed in its gate: %s\n%s", res.describe(), res.stderr)
}

// actDeadClaimHeld kills an apply in the health gate of a version that
// never becomes healthy, runs a window holding the unverified container,
// and applies mid-window: the healing apply must put the last good one
// back.
func actDeadClaimHeld(r *fltRun) {
	v := r.ver
	v.Version, v.Probe, v.Step = "2", "false", "4"
	r.writeMesh(v)
	r.killInGate("1s")
	r.windows = append(r.windows, fltWindow{step: "gc"})
	p := r.start(false, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	p.waitFor("step gc started")
	res := r.run(false, "apply", "-f", r.file, "--settle", "1s")
	r.t.Logf("mid-window apply: %s\n%s%s", res.describe(), res.stdout, res.stderr)
	res = p.wait()
	r.t.Logf("window: %s\n%s", res.describe(), res.stderr)
	r.finalExit = 1
}

// actCrashLoopKilled kills the first apply of a crash-looping service in
// its create's health gate; three more applies follow. None may call it
// unchanged: each must fail (exit 1), and none may leave it running.
func actCrashLoopKilled(r *fltRun) {
	v := r.ver
	v.Crash = true
	r.writeMesh(v)
	// A settle longer than the 2 s the service runs before each crash: a
	// gate seen through to its end fails it.
	r.killInGate("4s")
	for i := range 3 {
		res := r.run(false, "apply", "-f", r.file, "--settle", "4s")
		if res.code != 1 {
			r.t.Errorf("apply %d after the kill: exit %d, want 1 (a crash-looping container)\n%s%s", i+1, res.code, res.stdout, res.stderr)
		}
	}
	r.want, r.finalExit, r.settle = "", 1, "4s"
}

// sideV1 applies version 1 with the second container, side.
func sideV1(r *fltRun) {
	v := r.ver
	v.Side = "1"
	r.applied(v)
}

// actDeferredLost runs a window; mid-step an apply changes both the held
// service (deferred) and side, whose new container takes 8 s to pass its
// gate, so that the window closes while the apply still waits for it. Once
// both have ended, the deferred change must have been carried out.
func actDeferredLost(r *fltRun) {
	v := r.ver
	v.Step = "3"
	r.writeMesh(v)
	r.windows = append(r.windows, fltWindow{step: "gc"})
	w := r.start(false, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	w.waitFor("step gc started")
	v.Version, v.Side = "2", "8"
	r.writeMesh(v)
	a := r.start(false, "apply", "-f", r.file, "--settle", "1s")
	wres, ares := w.wait(), a.wait()
	r.t.Logf("window: %s\n%s", wres.describe(), wres.stderr)
	r.t.Logf("apply: %s\n%s%s", ares.describe(), ares.stdout, ares.stderr)
	r.want = "2"
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	x, err := r.g.m.Eng.Inspect(ctx, r.module+".svc")
	if err != nil || x.Labels["flt.version"] != "2" {
		r.t.Errorf("after the window and the apply that deferred a change to it, %s is version %q (%v), want 2", r.module+".svc", x.Labels["flt.version"], err)
	}
}
