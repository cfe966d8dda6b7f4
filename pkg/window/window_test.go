package window

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

const meshYAML = `
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1
        volumes: ["store-data:/var/lib/registry"]
      cache:
        image: meshtest/busybox:1
    steps:
      garbage-collect:
        while-stopped: [registry, cache]
        timeout: 30m
        run:
          command: [garbage-collect, /etc/docker/registry/config.yml]
      custom:
        while-stopped: [cache]
        run:
          image: meshtest/busybox:1
          command: [du, -s, /data]
          env: {A: "1"}
          volumes: ["/srv/x:/x:ro"]
          volumes-from: [registry]
          network: host
      check:
        while-stopped: [registry]
        exec: [/usr/local/bin/check, --all]
  other:
    containers:
      app:
        image: meshtest/busybox:1
`

func decode(t *testing.T, src string) *mesh.File {
	t.Helper()
	f, err := mesh.Decode("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func openTemp(t *testing.T) *state.Dir {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// recordApplied writes applied.json as an apply of f would.
func recordApplied(t *testing.T, d *state.Dir, f *mesh.File) {
	t.Helper()
	key, err := record.SecretKey(d, f)
	if err != nil {
		t.Fatal(err)
	}
	desired, err := record.Desire(f, nil, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]record.Resolved{}
	for _, x := range desired {
		images[x.Name] = record.Resolved{Image: x.Image}
	}
	l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if err := l.Write(record.AppliedFile, &record.Applied{AppliedAt: time.Now().UTC(), Source: "mesh.yaml", File: f, Images: images}); err != nil {
		t.Fatal(err)
	}
}

// applyFresh does what the first apply of f does on a host without
// containers: it creates and starts each desired container (health gate
// and all) and records applied.json.
// recordDeferred records in every hold on module that an apply reported
// names deferred, as a mid-window apply does (coord.RecordDeferred).
func recordDeferred(t *testing.T, d *state.Dir, module string, names ...string) {
	t.Helper()
	l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	hd, _, err := coord.ReadHolds(l.Read)
	if err != nil {
		t.Fatal(err)
	}
	deferred := map[string][]string{}
	for _, h := range hd.Holds {
		if h.Module == module {
			deferred[h.ID] = names
		}
	}
	if err := coord.RecordDeferred(l, deferred); err != nil {
		t.Fatal(err)
	}
}

func applyFresh(t *testing.T, d *state.Dir, eng engine.Client, f *mesh.File) {
	t.Helper()
	scope, err := d.ID()
	if err != nil {
		t.Fatal(err)
	}
	key, err := record.SecretKey(d, f)
	if err != nil {
		t.Fatal(err)
	}
	desired, err := record.Desire(f, nil, nil, key)
	if err != nil {
		t.Fatal(err)
	}
	x := lifecycle.Executor{Engine: eng, Scope: scope}
	for i := range desired {
		if err := x.Create(context.Background(), &desired[i]); err != nil {
			t.Fatal(err)
		}
	}
	recordApplied(t, d, f)
}

func usageMsg(t *testing.T, err error) string {
	t.Helper()
	var u *fault.Error
	if !errors.As(err, &u) {
		t.Fatalf("err = %v (%T), want a *fault.Error", err, err)
	}
	if u.Fault() != fault.BadInput {
		t.Fatalf("fault %q, want %q", u.Fault(), fault.BadInput)
	}
	return u.Msg
}

func TestResolveNothingApplied(t *testing.T) {
	d := openTemp(t)
	_, err := resolve(d, Options{Module: "store", Step: "garbage-collect"})
	msg := usageMsg(t, err)
	for _, want := range []string{d.Path(), "store/garbage-collect", "pass -f FILE or run meshctl apply first"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}

func TestResolveUnknown(t *testing.T) {
	f := decode(t, meshYAML)
	appliedDir := openTemp(t)
	recordApplied(t, appliedDir, f)
	for _, src := range []struct {
		name string
		d    *state.Dir
		file *mesh.File
	}{{"from -f", openTemp(t), f}, {"from the applied state", appliedDir, nil}} {
		t.Run(src.name, func(t *testing.T) {
			_, err := resolve(src.d, Options{Module: "nosuch", Step: "garbage-collect", File: src.file})
			if msg := usageMsg(t, err); !strings.Contains(msg, `module "nosuch"`) || !strings.Contains(msg, "[other store]") {
				t.Errorf("unknown module: %q", msg)
			}
			_, err = resolve(src.d, Options{Module: "other", Step: "garbage-collect", File: src.file})
			if msg := usageMsg(t, err); msg != `module other has no step "garbage-collect" (it has no steps)` {
				t.Errorf("unknown step: %q", msg)
			}
		})
	}
}

func TestResolveFromFile(t *testing.T) {
	d := openTemp(t)
	p, err := resolve(d, Options{Module: "store", Step: "garbage-collect", File: decode(t, meshYAML)})
	if err != nil {
		t.Fatal(err)
	}
	if p.module != "store" || p.step != "garbage-collect" || p.def.Run == nil {
		t.Fatalf("plan %+v", p)
	}
	if !slices.Equal(p.held, []string{"store.registry", "store.cache"}) {
		t.Errorf("held %v", p.held)
	}
	if p.timeout != 30*time.Minute {
		t.Errorf("timeout %s, want the step's 30m", p.timeout)
	}
	// Nothing applied: the close has nothing to converge to but what runs.
	if len(p.desired) != 0 {
		t.Errorf("desired %v, want none before any apply", p.desired)
	}

	p, err = resolve(d, Options{Module: "store", Step: "check", File: decode(t, meshYAML), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if p.timeout != time.Second {
		t.Errorf("--timeout 1s: timeout %s", p.timeout)
	}
	p, err = resolve(d, Options{Module: "store", Step: "custom", File: decode(t, meshYAML)})
	if err != nil {
		t.Fatal(err)
	}
	if p.timeout != mesh.DefaultStepTimeout {
		t.Errorf("no timeout anywhere: %s, want %s", p.timeout, mesh.DefaultStepTimeout)
	}
}

// TestResolveFromApplied: without -f the step comes from the last apply, and
// the held containers' desired state with it (what the close converges to).
func TestResolveFromApplied(t *testing.T) {
	d := openTemp(t)
	recordApplied(t, d, decode(t, meshYAML))
	p, err := resolve(d, Options{Module: "store", Step: "garbage-collect"})
	if err != nil {
		t.Fatal(err)
	}
	if p.def.Run == nil || !slices.Equal(p.def.Run.Command, []string{"garbage-collect", "/etc/docker/registry/config.yml"}) {
		t.Fatalf("step %+v", p.def)
	}
	if len(p.desired) != 2 || p.desired["store.registry"] == nil || p.desired["store.registry"].Image != "meshtest/registry:1" {
		t.Fatalf("desired %v", p.desired)
	}
	if p.desired["other.app"] != nil {
		t.Error("desired holds a container the window does not hold")
	}

	// -f wins over the applied state.
	changed := strings.Replace(meshYAML, "timeout: 30m", "timeout: 5m", 1)
	p, err = resolve(d, Options{Module: "store", Step: "garbage-collect", File: decode(t, changed)})
	if err != nil {
		t.Fatal(err)
	}
	if p.timeout != 5*time.Minute {
		t.Errorf("-f: timeout %s, want the file's 5m", p.timeout)
	}
}

// TestStepSpec: a run: step's one-off container defaults to the first held
// container's image, the held containers' volumes, no network, and carries
// the labels that let apply and window list find it.
func TestStepSpec(t *testing.T) {
	d := openTemp(t)
	recordApplied(t, d, decode(t, meshYAML))
	w := func(step string) *window {
		p, err := resolve(d, Options{Module: "store", Step: step})
		if err != nil {
			t.Fatal(err)
		}
		return &window{plan: p, id: "w-1", scope: "scope-1"}
	}
	spec, err := w("garbage-collect").stepSpec(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if spec.Image != "meshtest/registry:1" {
		t.Errorf("image %q, want the first held container's", spec.Image)
	}
	if !slices.Equal(spec.VolumesFrom, []string{"store.registry", "store.cache"}) {
		t.Errorf("volumes-from %v", spec.VolumesFrom)
	}
	if spec.NetworkMode != "none" || spec.Restart != "no" || spec.Entrypoint != nil {
		t.Errorf("network %q restart %q entrypoint %v", spec.NetworkMode, spec.Restart, spec.Entrypoint)
	}
	wantLabels := map[string]string{lifecycle.LabelManaged: "scope-1", lifecycle.LabelRole: lifecycle.RoleStep,
		lifecycle.LabelModule: "store", lifecycle.LabelWindow: "w-1"}
	for k, v := range wantLabels {
		if spec.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, spec.Labels[k], v)
		}
	}

	spec, err = w("custom").stepSpec(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if spec.Image != "meshtest/busybox:1" || !slices.Equal(spec.VolumesFrom, []string{"store.registry"}) ||
		spec.NetworkMode != "host" || !slices.Equal(spec.Env, []string{"A=1"}) || !slices.Equal(spec.Binds, []string{"/srv/x:/x:ro"}) {
		t.Errorf("custom step spec %+v", spec)
	}
}

func TestNames(t *testing.T) {
	id := newID(time.Date(2026, 3, 1, 3, 30, 2, 0, time.FixedZone("x", 3600)))
	if !regexp.MustCompile(`^w-20260301T023002-[0-9a-f]{6}$`).MatchString(id) {
		t.Errorf("newID = %q", id)
	}
	if a, b := newID(time.Now()), newID(time.Now()); a == b {
		t.Error("two ids in the same second are equal")
	}
	name := StepContainerName("store", "garbage-collect")
	if name != "meshctl-window.store.garbage-collect" {
		t.Errorf("StepContainerName = %q", name)
	}
	// A service container is "module.container": one dot. Never the same.
	if strings.Count(name, ".") != 2 {
		t.Errorf("%q could clash with a service container's name", name)
	}
}

// execWindow is a window ready to run an exec: step, without an engine.
func execWindow(argv []string, timeout time.Duration, out *bytes.Buffer) *window {
	return &window{
		opts: Options{StepOutput: out, Progress: func(format string, args ...any) { fmt.Fprintf(out, format, args...) }},
		plan: &plan{module: "m", step: "s", def: &mesh.Step{Exec: argv}, timeout: timeout},
	}
}

// TestRunStepExec: what a step's end records: result, exit status (only one
// it really had), and the error saying what failed.
func TestRunStepExec(t *testing.T) {
	tests := []struct {
		name     string
		argv     []string
		timeout  time.Duration
		result   string
		code     string // "nil" when none is recorded
		errMatch string
	}{
		{"succeeds", []string{"/bin/sh", "-c", "echo swept"}, time.Minute, ResultOK, "0", ""},
		{"fails", []string{"/bin/sh", "-c", "exit 3"}, time.Minute, ResultFailed, "3", "step s exited 3"},
		{"killed by a signal", []string{"/bin/sh", "-c", "kill -KILL $$"}, time.Minute, ResultFailed, "137", "step s exited 137"},
		{"past its timeout", []string{"/bin/sleep", "30"}, 200 * time.Millisecond, ResultTimeout, "137", "killed after its timeout of 200ms"},
		{"cannot start", []string{"/nonexistent/step"}, time.Minute, ResultFailed, "nil", "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			w := execWindow(tt.argv, tt.timeout, &out)
			start := time.Now()
			runStepOf(t, w, context.Background())
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s", took)
			}
			if w.result != tt.result {
				t.Errorf("result %q, want %q", w.result, tt.result)
			}
			code := "nil"
			if w.stepCode != nil {
				code = strconv.Itoa(*w.stepCode)
			}
			if code != tt.code {
				t.Errorf("exit code %s, want %s", code, tt.code)
			}
			switch {
			case tt.errMatch == "" && w.stepErr != nil:
				t.Errorf("error %v", w.stepErr)
			case tt.errMatch != "" && (w.stepErr == nil || !strings.Contains(w.stepErr.Error(), tt.errMatch)):
				t.Errorf("error %v, want one saying %q", w.stepErr, tt.errMatch)
			}
		})
	}
}

// TestRunStepInterrupted: a signal (the window's context cancelled) kills
// the step and the result says interrupted.
func TestRunStepInterrupted(t *testing.T) {
	var out bytes.Buffer
	w := execWindow([]string{"/bin/sleep", "30"}, time.Minute, &out)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	runStepOf(t, w, ctx)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("took %s: the step was not killed", took)
	}
	if w.result != ResultInterrupted || w.stepErr == nil || !strings.Contains(w.stepErr.Error(), "interrupted") {
		t.Errorf("result %q, error %v", w.result, w.stepErr)
	}
}

// TestExecStepGroupKilled: on timeout the step's whole process group dies,
// its children too, not just the process the window started; and the
// step's output reaches StepOutput.
func TestExecStepGroupKilled(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	var out bytes.Buffer
	w := execWindow([]string{"/bin/sh", "-c", `echo step-output; sleep 30 & echo $! > "$0"; wait`, pidFile}, 300*time.Millisecond, &out)
	runStepOf(t, w, context.Background())
	if w.result != ResultTimeout {
		t.Fatalf("result %q", w.result)
	}
	if !strings.Contains(out.String(), "step-output") {
		t.Errorf("step output not streamed: %q", out.String())
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the step's child %d outlived the step's timeout", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// running reports whether pid exists and is not a zombie.
func running(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// TestExecStepLeftoversKilled: a step that exits leaving a child running in
// its process group (a daemon it forked) does not leave it running past the
// step. Its output goes to a file, as to a real stderr: nothing waits on a
// pipe the child holds open.
func TestExecStepLeftoversKilled(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	outFile, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	w := &window{
		opts: Options{StepOutput: outFile, Progress: func(string, ...any) {}},
		plan: &plan{module: "m", step: "s", timeout: time.Minute,
			def: &mesh.Step{Exec: []string{"/bin/sh", "-c", `sleep 30 & echo $! > "$0"`, pidFile}}},
	}
	start := time.Now()
	runStepOf(t, w, context.Background())
	if w.result != ResultOK {
		t.Fatalf("result %q, %v", w.result, w.stepErr)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the step took %s", took)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the step's child %d outlived the step", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
