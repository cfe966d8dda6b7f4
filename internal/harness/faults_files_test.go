package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/pkg/engine"
)

// The doors of a secret and a config file that change, go missing or
// cannot be read: while an apply plans and creates, around a window's
// close, and between a mid-window apply that defers their new content and
// the close that carries it out.

// fltSeen, put after the service's trap, writes what the secret read as
// the container started to TERMDIR/seen.HOSTNAME, HOSTNAME being the first
// 12 characters of the container's ID. A FIFO there is not waited for.
const fltSeen = "{ timeout 2 cat /run/secrets/token > /flt/seen.$(hostname); } 2>/dev/null; "

// filesV1 applies version 1 with a secret and a config file.
func filesV1(r *fltRun) {
	v := r.ver
	v.Secret, v.Interval = r.writeSecret(), fltQuick
	v.Config = filepath.Join(r.dir, "conf")
	if err := os.WriteFile(v.Config, []byte("level=1\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.applied(v)
}

// checkSeen checks that container x read, as it started, what the secret
// file holds now.
func (r *fltRun) checkSeen(x engine.Container, when string) {
	want, err := os.ReadFile(r.ver.Secret)
	if err != nil {
		r.t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(r.termDir(), "seen."+x.ID[:12]))
	if err != nil || string(got) != string(want) {
		r.t.Errorf("%s %s (%.12s) runs with a secret other than the file's (%d bytes read of %d, %v)", when, x.Name, x.ID, len(got), len(want), err)
	}
}

// rotateSecret gives the secret file a new content as a rotation does:
// a new file renamed over the old one. A container started before keeps
// the old one's content.
func (r *fltRun) rotateSecret() {
	tmp := r.ver.Secret + ".new"
	if err := os.WriteFile(tmp, []byte("token-"+strconv.Itoa(r.rng.IntN(1e6))+"-rotated\n"), 0o600); err != nil {
		r.t.Fatal(err)
	}
	if err := os.Rename(tmp, r.ver.Secret); err != nil {
		r.t.Fatal(err)
	}
}

// fileBreaks are the ways a file goes missing or unreadable. Unreadable
// by mode needs a user other than root; root reads any mode, so it is
// last.
var fileBreaks = []string{"removed", "a directory", "a FIFO", "mode 000"}

// breakFile makes the secret or the config file (drawn) missing or
// unreadable (drawn) and returns what puts it back as it was.
func (r *fltRun) breakFile() (what string, restore func()) {
	path := r.ver.Secret
	if r.rng.IntN(2) == 1 {
		path = r.ver.Config
	}
	breaks := fileBreaks
	if os.Geteuid() == 0 {
		breaks = breaks[:len(breaks)-1]
	}
	return r.breakPath(path, breaks[r.rng.IntN(len(breaks))])
}

// breakPath makes the file path missing or unreadable as how says (one
// of fileBreaks, "a directory" or "a FIFO") and returns what puts it back.
func (r *fltRun) breakPath(path, how string) (what string, restore func()) {
	data, err := os.ReadFile(path)
	if err != nil {
		r.t.Fatal(err)
	}
	switch how {
	case "mode 000":
		err = os.Chmod(path, 0)
	default:
		err = os.Remove(path)
		if err == nil && how == "a directory" {
			err = os.Mkdir(path, 0o700)
		}
		if err == nil && how == "a FIFO" {
			err = syscall.Mkfifo(path, 0o600)
		}
	}
	if err != nil {
		r.t.Fatal(err)
	}
	return filepath.Base(path) + " " + how, func() {
		if err := os.RemoveAll(path); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			r.t.Fatal(err)
		}
	}
}

// breakAt breaks a file (breakFile) at a drawn instant of [0, span) after
// now, unless p ended first. It returns what puts it back, and whether it
// broke one. A calibration leaves the files alone: its calls are the
// doors.
func (r *fltRun) breakAt(p *fltProc, span time.Duration) (restore func(), broke bool) {
	delay := time.Duration(r.rng.Int64N(int64(span)))
	if r.calibrating {
		return func() {}, false
	}
	select {
	case <-p.done:
		r.t.Logf("meshctl %s ended within %s: no file broken", strings.Join(p.args, " "), delay.Round(time.Millisecond))
		return func() {}, false
	case <-time.After(delay):
	}
	what, restore := r.breakFile()
	r.t.Logf("%s after %s", what, delay.Round(time.Millisecond))
	return restore, true
}

// startsWithout reports whether a command's output says a start found a
// file it binds missing, or not a regular file. Nothing can start a
// container whose secret or config is gone, the old one included: the
// engine refuses the start. Nor one whose file is a FIFO or a directory:
// meshctl refuses it, since the start would bind that.
func startsWithout(res fltResult) bool {
	out := res.stdout + res.stderr
	return strings.Contains(out, "bind source path does not exist") || strings.Contains(out, "not started: the file it binds at")
}

// actFileVanishesInApply rotates the secret and applies version 2
// through the proxy, and the secret or the config goes missing or
// unreadable at a drawn instant of the apply: before its plan reads it,
// between the plan and the create, or later. Once the apply returns,
// whatever it said, the service runs, unless a start found its file gone;
// the file comes back for the healing apply, after which the service reads
// the rotated secret.
func actFileVanishesInApply(r *fltRun) {
	v := r.ver
	v.Version = "2"
	r.rotateSecret()
	r.writeMesh(v)
	r.want = "2"
	p := r.start(true, "apply", "-f", r.file, "--settle", "1s")
	restore, broke := r.breakAt(p, 4*time.Second)
	res := p.wait()
	r.t.Logf("apply: %s\n%s%s", res.describe(), res.stdout, res.stderr)
	if res.sig == 0 {
		when := "after an apply that exited " + strconv.Itoa(res.code)
		r.checkAfterApply(when)
		if !(broke && res.code != 0 && startsWithout(res)) {
			r.checkServiceRuns(when)
		}
	}
	restore()
}

// actFileRemovedBeforeStart applies version 2 through the proxy, whose
// first start (the new container's) is delayed; the secret is removed
// while that start waits. The start must fail, not bind an empty
// directory the engine makes in the file's place; the old version is put
// back under its name (exit 1), stopped: its start is refused too, for
// the same file. The file comes back, and the healing apply converges.
func actFileRemovedBeforeStart(r *fltRun) {
	v := r.ver
	v.Version = "2"
	r.writeMesh(v)
	r.want = "2"
	before := len(r.g.proxy.Calls())
	p := r.start(true, "apply", "-f", r.file, "--settle", "1s")
	data, err := os.ReadFile(v.Secret)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.waitFault(p, before, faultproxy.Delay) {
		if err := os.Remove(v.Secret); err != nil {
			r.t.Fatal(err)
		}
	}
	res := p.wait()
	r.t.Logf("apply: %s\n%s%s", res.describe(), res.stdout, res.stderr)
	if res.code != 1 || !startsWithout(res) {
		r.t.Errorf("the apply whose secret went missing before its start exited %d, want 1 and the engine's refusal of the start", res.code)
	}
	r.checkAfterApply("after the apply")
	if x := r.inspect(r.module + ".svc"); x.Labels["flt.version"] != "1" {
		r.t.Errorf("after the apply %s is version %q, want 1 put back under its name", x.Name, x.Labels["flt.version"])
	}
	if err := os.RemoveAll(v.Secret); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(v.Secret, data, 0o600); err != nil {
		r.t.Fatal(err)
	}
}

// actSecretReplacedInWindow replaces the held service's secret by a
// directory (or a FIFO) mid-step, puts the file back once the window
// ended, and leaves the rest to the healing apply: the service must then
// run with the file's content.
func actSecretReplacedInWindow(how string) func(r *fltRun) {
	return func(r *fltRun) {
		v := r.ver
		v.Step = "2"
		r.writeMesh(v)
		r.windows = append(r.windows, fltWindow{step: "gc"})
		p := r.start(false, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
		restore := func() {}
		if p.waitFor("step gc started") {
			_, restore = r.breakPath(v.Secret, how)
		}
		res := p.wait()
		r.t.Logf("window: %s\n%s", res.describe(), res.stderr)
		found := map[string]string{"a FIFO": "a named pipe", "a directory": "a directory"}[how]
		if res.code != 1 || !strings.Contains(res.stderr, v.Secret+", is "+found) {
			r.t.Errorf("the window whose held service's secret is %s at the close: %s, want exit 1 naming %s and %s", how, res.describe(), v.Secret, found)
		}
		if x := r.inspect(r.module + ".svc"); x.Running {
			r.t.Errorf("after the close %s runs, and its secret is %s", x.Name, how)
		}
		restore()
	}
}

// actDeferredFiles runs a window through the proxy. Mid-step the secret
// is rotated, and an apply without faults reports the service deferred.
// Then the secret or the config goes missing or unreadable at a drawn
// instant of the rest of the step or of the close. Where no file broke
// and the close exited 0, what was reported deferred is what runs
// (checkDeferredRan). Where no fault fired, or the window exited 0, the
// service runs after it, unless a start found its file gone.
func actDeferredFiles(r *fltRun) {
	v := r.ver
	v.Step = "3"
	r.writeMesh(v)
	r.windows = append(r.windows, fltWindow{step: "gc"})
	held := r.inspect(r.module + ".svc")
	before := len(r.g.proxy.Calls())
	p := r.start(true, "window", "run", r.module, "gc", "-f", r.file, "--settle", "1s")
	if !p.waitFor("step gc started") {
		// A fault ended the window before its step: nothing is held.
		r.t.Logf("window: %s\n%s", p.wait().describe(), p.err.String())
		return
	}
	r.rotateSecret()
	res := r.run(false, "apply", "-f", r.file, "--settle", "1s", "-o", "json")
	deferred := reported(res.stdout, r.module+".svc") == "deferred"
	// The window holds the service from before its step until its close
	// ends: one still running once the apply returned held it all along.
	// A fault may end it sooner.
	ended := false
	select {
	case <-p.done:
		ended = true
	default:
	}
	if !deferred && !ended && !(r.hangs() && res.code == 130) {
		r.t.Errorf("the mid-window apply: %s, %s reported %q, want deferred\n%s%s", res.describe(), r.module+".svc", reported(res.stdout, r.module+".svc"), res.stdout, res.stderr)
	}
	restore, broke := r.breakAt(p, 4*time.Second)
	wres := p.wait()
	r.t.Logf("window: %s\n%s", wres.describe(), wres.stderr)
	// Back before the checks: checkSeen compares with the file.
	restore()
	if wres.code == 0 && !ended && !broke {
		r.checkDeferredRan(held, deferred)
	}
	without := broke && wres.code != 0 && startsWithout(wres)
	if wres.sig == 0 && !without && (wres.code == 0 || len(fired(r.g.proxy.Calls()[before:])) == 0) {
		r.checkServiceRuns("after a window that exited " + strconv.Itoa(wres.code))
	}
}

// checkDeferredRan checks what a close that exited 0 left: if an apply
// reported the held service deferred during the window, it runs the
// desired spec as at the close (a new container that read the secret the
// file holds); else the container held, as it was.
func (r *fltRun) checkDeferredRan(held engine.Container, deferred bool) {
	x := r.inspect(r.module + ".svc")
	when := "after a close that exited 0"
	switch {
	case x.ID == "":
	case !x.Running:
		r.t.Errorf("%s %s is %s", when, x.Name, x.State)
	case deferred && x.ID == held.ID:
		r.t.Errorf("%s %s is the container the window held, and an apply reported a change to it deferred", when, x.Name)
	case deferred:
		r.checkSeen(x, when+" that carried out a deferred change,")
	case x.ID != held.ID:
		r.t.Errorf("%s %s was recreated, and no apply reported a change to it deferred", when, x.Name)
	}
}

// inspect returns the container name; an error is the test's.
func (r *fltRun) inspect(name string) engine.Container {
	ctx, cancel := context.WithTimeout(r.t.Context(), time.Minute)
	defer cancel()
	x, err := r.g.m.Eng.Inspect(ctx, name)
	if err != nil {
		r.t.Errorf("inspect %s: %v", name, err)
	}
	return x
}

// reported returns the action an apply's JSON report gives the
// container name, or "".
func reported(stdout, name string) string {
	type row struct{ Name, Action string }
	var rep struct {
		Containers []row
		Report     *struct{ Containers []row }
	}
	if json.Unmarshal([]byte(stdout), &rep) != nil {
		return ""
	}
	rows := rep.Containers
	if rep.Report != nil {
		rows = append(rows, rep.Report.Containers...)
	}
	if i := slices.IndexFunc(rows, func(x row) bool { return x.Name == name }); i >= 0 {
		return rows[i].Action
	}
	return ""
}
