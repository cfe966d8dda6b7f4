package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/engine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// meshKillFile is the module of the mesh scenarios: one service per host,
// held stopped by a mesh: all step. The step is a short run: container on
// the runner's engine. The budget lets the three hosts be down at once.
const meshKillFile = `modules:
  MODULE:
    max-unavailable: 3
    containers:
      svc:
        image: meshtest/busybox:1
        entrypoint: [/bin/sleep]
        command: ["3600"]
        restart: always
        network: none
        stop-signal: SIGKILL
    steps:
      sweep:
        mesh: all
        gather: 2s
        timeout: 5s
        while-stopped: [svc]
        run:
          image: meshtest/busybox:1
          entrypoint: [/bin/sleep]
          command: ["1"]
`

// meshSettle is the --settle of the scenarios' windows and applies.
const meshSettle = "300ms"

// waitFence waits until the last gathering's fence lapsed. The fence lives
// twice gather from the gathering's creation, by an etcd lease. Until it
// lapses, a join of the same step belongs to that gathering, and is refused
// once its step started. A host cut off from etcd may open a gathering of
// its own late, and etcd lets a lease outlive its TTL (on a leader change,
// under load). So the rounds read the key, as the ledger names it.
func (r *meshRig) waitFence() {
	r.t.Helper()
	key := r.prefix + "/mesh/gatherings/" + r.module + "/fence"
	end := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := r.etcd.Get(ctx, key)
		cancel()
		if err == nil && len(resp.Kvs) == 0 {
			return
		}
		if time.Now().After(end) {
			r.t.Fatalf("the fence %s did not lapse within a minute: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// meshHost is one host of a mesh scenario: a meshctl with a state
// directory and host name of its own, on its engine.
type meshHost struct {
	*meshctl
	name, sock string
	rec        *eventcheck.Recorder
	// id is its service container's ID, the one every round must leave.
	id string
	// spec is that container's spec label: its normal spec.
	spec string
}

// meshRig is a module run by every host engine over one etcd prefix.
type meshRig struct {
	t      *testing.T
	module string
	file   string
	hosts  []*meshHost
	rounds int
	// began and ended are when the last round's windows started, and
	// when the last of them ended.
	began, ended time.Time
	// gatherings are the IDs of the gatherings the rounds' windows joined.
	gatherings map[string]bool
	// etcd reads the gatherings' fences directly, prefix is the ledger's.
	etcd   *clientv3.Client
	prefix string
	// beforeHeal, when set, runs once a round's windows ended, before its
	// applies. A fault scenario lifts its faults there.
	beforeHeal func()
	ledger     string
	etcdEps    string
}

// newMeshRig makes the module's hosts, each with ledger as its --ledger
// (MESHCTL_LEDGER), and applies the module on each. ledger "" is the test
// etcd under a prefix of the test's own.
func newMeshRig(t *testing.T) *meshRig {
	t.Helper()
	eps := etcdtest.Endpoints(t)
	return newMeshRigWith(t, func(_ *meshHost, prefix string) string { return "etcd://" + eps + prefix })
}

// newMeshRigWith is newMeshRig with each host's ledger of its own, under
// the rig's prefix.
func newMeshRigWith(t *testing.T, ledger func(h *meshHost, prefix string) string) *meshRig {
	t.Helper()
	hosts := meshrun.TestHosts(t)
	eps := strings.Split(etcdtest.Endpoints(t), ",")
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	r := &meshRig{t: t, module: fmt.Sprintf("meshk%08x", rand.Uint32()), gatherings: map[string]bool{},
		etcd: cli, prefix: etcdtest.Prefix(t.Name())}
	doc := strings.ReplaceAll(meshKillFile, "MODULE", r.module)
	r.file = filepath.Join(t.TempDir(), "mesh.yaml")
	if err := os.WriteFile(r.file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, h := range hosts {
		m := newMeshctl(t, h.Sock)
		mh := &meshHost{meshctl: m, name: h.Name, sock: h.Sock}
		m.SetEnv("MESHCTL_HOST_NAME", h.Name)
		m.SetEnv("MESHCTL_LEDGER", ledger(mh, r.prefix))
		m.CleanupModule(r.module)
		r.hosts = append(r.hosts, mh)
	}
	for _, h := range r.hosts {
		if out, err := h.Run("apply", "-f", r.file, "--settle", meshSettle); err != nil {
			t.Fatalf("%s: first apply: %v\n%s", h.name, err, out)
		}
		x := h.inspect(r.module + ".svc")
		if x.State != "running" {
			t.Fatalf("%s: after the first apply %s is %s", h.name, x.Name, x.State)
		}
		h.id = x.ID
		h.spec = x.Labels["io.meshctl.spec"]
		if h.spec == "" {
			t.Fatalf("%s: %s has no spec label", h.name, x.Name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		rec, err := eventcheck.Record(ctx, h.sock, func(_ string, labels map[string]string) bool {
			return labels["io.meshctl.module"] == r.module
		})
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", h.name, err)
		}
		h.rec = rec
		t.Cleanup(rec.Stop)
	}
	return r
}

// host returns the host of name.
func (r *meshRig) host(name string) *meshHost {
	for _, h := range r.hosts {
		if h.name == name {
			return h
		}
	}
	r.t.Fatalf("no host %s", name)
	return nil
}

// meshWin is one host's window run of a round.
type meshWin struct {
	h      *meshHost
	cmd    *exec.Cmd
	stderr *meshrun.Output
	done   chan struct{}
	err    error
}

// killed reports whether a SIGKILL ended the window.
func (w *meshWin) killed() bool {
	var exit *exec.ExitError
	if errors.As(w.err, &exit) {
		ws, ok := exit.Sys().(syscall.WaitStatus)
		return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
	}
	return false
}

// roundMark is where a round's events begin on each host. Each host's
// running containers of the module are its first events, at the zero time.
type roundMark struct {
	from    map[string]int
	initial map[string][]eventcheck.Event
}

// mark lists what runs on each host, once its record runs.
func (r *meshRig) mark() roundMark {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mk := roundMark{from: map[string]int{}, initial: map[string][]eventcheck.Event{}}
	for _, h := range r.hosts {
		mk.from[h.name] = len(h.rec.Events())
		list, err := h.Eng.List(ctx, map[string]string{"io.meshctl.module": r.module})
		if err != nil {
			r.t.Fatal(err)
		}
		for _, x := range list {
			if x.Running {
				mk.initial[h.name] = append(mk.initial[h.name], eventcheck.Event{Action: "start", ID: x.ID, Name: x.Name, Labels: x.Labels})
			}
		}
	}
	return mk
}

// startWindows starts the three windows at once, each with extra args.
func (r *meshRig) startWindows() []*meshWin {
	r.t.Helper()
	r.waitFence()
	r.began = time.Now()
	var ws []*meshWin
	for _, h := range r.hosts {
		w := &meshWin{h: h, stderr: &meshrun.Output{}, done: make(chan struct{})}
		w.cmd = h.Command("window", "run", r.module, "sweep", "-f", r.file, "--settle", meshSettle)
		w.cmd.Stderr, w.cmd.Stdout = w.stderr, w.stderr
		ws = append(ws, w)
	}
	for _, w := range ws {
		if err := w.cmd.Start(); err != nil {
			r.t.Fatal(err)
		}
		go func() { w.err = w.cmd.Wait(); close(w.done) }()
	}
	return ws
}

// waitWindows waits for every window to end. One still running after
// bound is a finding: the harness kills it and fails.
func (r *meshRig) waitWindows(ws []*meshWin, bound time.Duration) {
	r.t.Helper()
	end := time.After(bound)
	for _, w := range ws {
		select {
		case <-w.done:
		case <-end:
			_ = w.cmd.Process.Kill()
			<-w.done
			r.t.Fatalf("%s: the window did not end within %s:\n%s", w.h.name, bound, r.logs(ws))
		}
	}
	r.ended = time.Now()
}

// logs is every window's output, for a failure's reader.
func (r *meshRig) logs(ws []*meshWin) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "--- %s (%v)\n%s", w.h.name, w.err, w.stderr.String())
	}
	return b.String()
}

var runnerLine = regexp.MustCompile(`holds; host (\S+) runs the step`)

// runnerOf names the host that runs the step, by the windows' stderr. It
// is "" while no window has joined yet.
func runnerOf(ws []*meshWin) string {
	for _, w := range ws {
		s := w.stderr.String()
		if strings.Contains(s, "this host runs the step") {
			return w.h.name
		}
		if m := runnerLine.FindStringSubmatch(s); m != nil {
			return m[1]
		}
	}
	return ""
}

// meshPhase names where a mesh window was by its stderr.
func meshPhase(stderr string) string {
	switch {
	case strings.Contains(stderr, " closed after "):
		return "exiting"
	case strings.Contains(stderr, " finished in "), strings.Contains(stderr, ": the step ended on host "):
		return "close"
	case strings.Contains(stderr, "step sweep started"), strings.Contains(stderr, "waiting for its end"):
		return "step"
	case strings.Contains(stderr, "to start the step"), strings.Contains(stderr, "waiting for every host to hold"):
		return "held"
	case strings.Contains(stderr, "every host joined; holding"):
		return "holding"
	case strings.Contains(stderr, "joined gathering"):
		return "gathering"
	}
	return "joining"
}

// healAndCheck ends a round. It waits until no step container runs, then
// applies on each host, runner first, and checks the hosts healed. The
// engines' events since mk must show the step at most once, and no normal
// container running on any host while it ran. what names the round.
func (r *meshRig) healAndCheck(what, runner string, mk roundMark) {
	r.t.Helper()
	r.rounds++
	r.waitNoStep(what)
	order := slices.Clone(r.hosts)
	if runner != "" {
		slices.SortStableFunc(order, func(a, b *meshHost) int {
			return btoi(b.name == runner) - btoi(a.name == runner)
		})
	}
	for _, h := range order {
		if out, err := h.Run("apply", "-f", r.file, "--settle", meshSettle); err != nil {
			r.t.Fatalf("%s: %s: the next apply failed: %v\n%s", what, h.name, err, out)
		}
	}
	for _, h := range r.hosts {
		if !h.healed(r.module+".svc", h.id) {
			r.t.Fatalf("%s: %s: one apply per host did not heal it", what, h.name)
		}
		h.checkStatus(what)
	}
	r.checkEvents(what, mk)
}

// failedWindow is status --check's line of a window that failed, or died
// and was released stale: a person acknowledges it (CONTRACT §8).
var failedWindow = regexp.MustCompile(`^window (w-\S+) .*meshctl window ack (w-\S+)`)

// checkStatus checks that status --check is ok on h. A round's failed
// windows are acknowledged first, as a person would after reading them;
// any other problem fails the test.
func (h *meshHost) checkStatus(what string) {
	h.T.Helper()
	out, errOut, err := h.Run2("status", "--check")
	if err == nil && strings.TrimSpace(out) == "ok" {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(out+errOut), "\n") {
		m := failedWindow.FindStringSubmatch(line)
		switch {
		case m != nil && m[1] == m[2]:
			if o, err := h.Run("window", "ack", m[1]); err != nil {
				h.T.Fatalf("%s: %s: window ack %s: %v\n%s", what, h.name, m[1], err, o)
			}
		case strings.HasPrefix(line, "meshctl: ") && strings.HasSuffix(line, "needs a person"):
		default:
			h.T.Fatalf("%s: %s: status --check: %v\n%s%s", what, h.name, err, out, errOut)
		}
	}
	out, errOut, err = h.Run2("status", "--check")
	if err != nil || strings.TrimSpace(out) != "ok" {
		h.T.Fatalf("%s: %s: status --check after the acks: %v\n%s%s", what, h.name, err, out, errOut)
	}
}

// waitNoStep waits until no step container of the module runs on any
// engine. A dead runner's step container runs to its end.
func (r *meshRig) waitNoStep(what string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, h := range r.hosts {
		for {
			list, err := h.Eng.List(ctx, map[string]string{"io.meshctl.module": r.module, "io.meshctl.role": "step"})
			if err != nil {
				r.t.Fatalf("%s: %s: %v", what, h.name, err)
			}
			if !slices.ContainsFunc(list, func(x engine.Container) bool { return x.Running }) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// checkEvents checks the round's events on every engine.
func (r *meshRig) checkEvents(what string, mk roundMark) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := map[string][]eventcheck.Event{}
	var steps []eventcheck.Interval
	for _, h := range r.hosts {
		if err := h.rec.Sync(ctx, "meshtest/busybox:1"); err != nil {
			r.t.Fatalf("%s: %s: %v", what, h.name, err)
		}
		if err := h.rec.Err(); err != nil {
			r.t.Fatalf("%s: %s: the event record ended: %v", what, h.name, err)
		}
		evs := append(slices.Clone(mk.initial[h.name]), h.rec.Events()[mk.from[h.name]:]...)
		events[h.name] = evs
		for _, iv := range eventcheck.StepIntervals(eventcheck.Intervals(evs), r.module, "sweep") {
			steps = append(steps, iv)
		}
	}
	if len(steps) > 1 {
		r.t.Errorf("%s: the step ran %d times in one round: %v", what, len(steps), steps)
	}
	for _, h := range r.hosts {
		for _, v := range eventcheck.NormalDuringStep(h.name, events[h.name], r.module, []string{h.spec}, steps) {
			r.t.Errorf("%s: %v", what, v)
		}
	}
	if r.t.Failed() {
		for _, h := range r.hosts {
			r.t.Logf("host %s:", h.name)
			for _, e := range events[h.name] {
				r.t.Logf("  %s %s %.12s %s", e.At.Format("15:04:05.000"), e.Action, e.ID, e.Name)
			}
		}
		r.t.FailNow()
	}
}

// round runs one round: the three windows start at once, during acts on
// them (a kill, a fault), and once all ended each host's next apply must
// heal it all (healAndCheck). A window that was not killed may fail (exit
// 1), or be refused by this round's gathering (exit 3, late), never by an
// older one (checkRefusals). round returns the windows.
func (r *meshRig) round(what string, during func(ws []*meshWin) string) []*meshWin {
	r.t.Helper()
	mk := r.mark()
	ws := r.startWindows()
	runner := ""
	if during != nil {
		runner = during(ws)
	}
	r.waitWindows(ws, 2*time.Minute)
	if r.beforeHeal != nil {
		r.beforeHeal()
	}
	if runner == "" {
		runner = runnerOf(ws)
	}
	r.t.Logf("%s; windows: %s", what, exits(ws))
	r.checkRefusals(what, ws)
	r.healAndCheck(what, runner, mk)
	return ws
}

var (
	joinedLine  = regexp.MustCompile(`joined gathering (g-\S+)`)
	refusedLine = regexp.MustCompile(`\(gathering (g-\S+)\)`)
)

// checkRefusals fails the test when a round's window was refused by an
// older round's gathering, or all of them were refused (exit 3): the last
// round's applies did not heal the mesh. A window refused by this round's
// gathering joined late, as a fault may make it. Exit 2 always fails.
func (r *meshRig) checkRefusals(what string, ws []*meshWin) {
	r.t.Helper()
	refused := 0
	for _, w := range ws {
		var exit *exec.ExitError
		if !errors.As(w.err, &exit) || (exit.ExitCode() != 2 && exit.ExitCode() != 3) {
			continue
		}
		refused++
		m := refusedLine.FindStringSubmatch(w.stderr.String())
		if exit.ExitCode() == 2 || m == nil || r.gatherings[m[1]] {
			r.t.Fatalf("%s: %s: the window was refused (exit %d): the last round's applies did not heal the mesh:\n%s",
				what, w.h.name, exit.ExitCode(), r.logs(ws))
		}
	}
	if refused == len(ws) {
		r.t.Fatalf("%s: every window was refused: the last round's applies did not heal the mesh:\n%s", what, r.logs(ws))
	}
	for _, w := range ws {
		if m := joinedLine.FindStringSubmatch(w.stderr.String()); m != nil {
			r.gatherings[m[1]] = true
		}
	}
}

// calibrate runs rounds without a fault. It returns the longest life of a
// round's windows, start to the last exit, and checks each round as any.
func (r *meshRig) calibrate(n int) time.Duration {
	r.t.Helper()
	var life time.Duration
	for i := range n {
		ws := r.round(fmt.Sprintf("calibration round %d", i), nil)
		for _, w := range ws {
			if w.err != nil {
				r.t.Fatalf("calibration round %d: %s: %v\n%s", i, w.h.name, w.err, r.logs(ws))
			}
		}
		life = max(life, r.ended.Sub(r.began))
	}
	r.t.Logf("a mesh window's round lives %s", life.Round(time.Millisecond))
	return life
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestMeshKills SIGKILLs one process of a mesh window, a member or the
// runner, drawn, at an instant drawn over the window's life. Then each
// host's next apply, the runner's first, must heal it all: every service
// running normally, the same container, no hold, status --check ok on each
// host. By the engines' events the step ran at most once a round, and no
// container ran its normal spec on any host while it ran. Four kills
// always; MESHCTL_STRESS=1 makes it 60 (or MESHCTL_STRESS_KILLS=N).
func TestMeshKills(t *testing.T) {
	r := newMeshRig(t)
	kills := stressKills(t, 4, 60)
	life := r.calibrate(1)
	phases := map[string]int{}
	start := time.Now()
	for i := range kills {
		// Stratified: kill i lands in the i-th of kills slices of the life,
		// cycling over 8 slices under stress.
		slots := min(kills, 8)
		delay := time.Duration((float64(i%slots) + rand.Float64()) / float64(slots) * float64(life))
		victimRunner := rand.IntN(2) == 0
		what := ""
		r.round(fmt.Sprintf("kill %d", i), func(ws []*meshWin) string {
			time.Sleep(delay)
			runner := runnerOf(ws)
			var victim *meshWin
			role := "member"
			switch {
			case runner == "":
				victim, role = ws[rand.IntN(len(ws))], "host"
			case victimRunner:
				victim, role = ws[slices.IndexFunc(ws, func(w *meshWin) bool { return w.h.name == runner })], "runner"
			default:
				others := slices.DeleteFunc(slices.Clone(ws), func(w *meshWin) bool { return w.h.name == runner })
				victim = others[rand.IntN(len(others))]
			}
			phase := meshPhase(victim.stderr.String())
			_ = victim.cmd.Process.Signal(syscall.SIGKILL)
			<-victim.done
			if !victim.killed() {
				phase = "exited"
			}
			what = role + " " + phase
			t.Logf("kill %d: %s %s after %s, in %s", i, role, victim.h.name, delay.Round(time.Millisecond), phase)
			return runner
		})
		phases[what]++
	}
	t.Logf("%d kills in %s; by role and phase: %v", kills, time.Since(start).Round(time.Millisecond), phases)
}

// exits says how each window ended.
func exits(ws []*meshWin) string {
	var s []string
	for _, w := range ws {
		e := "0"
		switch {
		case w.killed():
			e = "killed"
		case w.err != nil:
			var exit *exec.ExitError
			if errors.As(w.err, &exit) {
				e = fmt.Sprint(exit.ExitCode())
			} else {
				e = w.err.Error()
			}
		}
		s = append(s, w.h.name+"="+e)
	}
	return strings.Join(s, " ")
}
