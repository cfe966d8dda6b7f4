package lifecycle

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

func desiredOf(t *testing.T, image string, health *mesh.Healthcheck) *Desired {
	t.Helper()
	c := &mesh.Container{Image: image}
	c.Healthcheck = health
	return &Desired{Name: "m.c", Module: "m", Container: "c", Def: *c, Image: image, Spec: c.Spec(image)}
}

var probe = &mesh.Healthcheck{Test: mesh.HealthTest{"CMD", "true"}, Interval: mesh.Duration(10 * time.Millisecond),
	Timeout: mesh.Duration(10 * time.Millisecond), Retries: 2}

// TestRecreateUnhealthyPutsBack: a new container whose probe fails is
// removed and the old one put back, running, under its name; the error says
// why, with the new one's log.
func TestRecreateUnhealthyPutsBack(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1", "new:1")
	var got []string
	x := Executor{Engine: f, Scope: "s", Health: func(name, h string) { got = append(got, name+" "+h) }}
	if err := x.Create(ctx, desiredOf(t, "old:1", nil)); err != nil {
		t.Fatal(err)
	}
	old, _ := f.Inspect(ctx, "m.c")
	f.SetHealth("new:1", "unhealthy", "probe says no\n")
	f.Changes()
	err := x.Recreate(ctx, desiredOf(t, "new:1", probe), old)
	var he *HealthError
	if !errors.As(err, &he) || he.Reason != "unhealthy: probe says no" || he.Health != HealthUnhealthy || !slices.Equal(he.Log, []string{"log of m.c"}) {
		t.Fatalf("Recreate = %v (%+v), want unhealthy: probe says no", err, he)
	}
	now, ok := f.Get("m.c")
	if !ok || now.ID != old.ID || !now.Running {
		t.Errorf("m.c = %+v, want the old container %s running", now, old.ID)
	}
	if n := len(f.Containers()); n != 1 {
		t.Errorf("%d containers, want only the old one", n)
	}
	want := []string{"create m.c.meshctl-new", "stop m.c", "start m.c.meshctl-new", "rename m.c m.c.meshctl-old",
		"rename m.c.meshctl-new m.c", "remove m.c", "rename m.c.meshctl-old m.c", "start m.c"}
	if ch := f.Changes(); !slices.Equal(ch, want) {
		t.Errorf("events %q\nwant   %q", ch, want)
	}
	if !slices.Equal(got, []string{"m.c running", "m.c unhealthy"}) {
		t.Errorf("health told: %q", got)
	}
}

// TestCreateWaitsUntilHealthy: a create returns once the probe passes, not
// at the start.
func TestCreateWaitsUntilHealthy(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("new:1")
	f.SetHealth("new:1", "starting", "")
	var inspects atomic.Int32
	f.Hook = func(op, target string) {
		if op == enginetest.OpInspect && inspects.Add(1) == 3 {
			f.SetHealth("new:1", "healthy", "ok")
		}
	}
	var health string
	x := Executor{Engine: f, Scope: "s", Health: func(_, h string) { health = h }}
	slow := &mesh.Healthcheck{Test: mesh.HealthTest{"CMD", "true"}, Interval: mesh.Duration(time.Second)}
	if err := x.Create(ctx, desiredOf(t, "new:1", slow)); err != nil {
		t.Fatal(err)
	}
	if health != HealthHealthy || inspects.Load() < 3 {
		t.Errorf("health %q after %d inspects, want healthy after 3", health, inspects.Load())
	}
}

// TestCreateThatExitsIsRemoved: a new container that stops within the
// settle time fails its create, and is not left behind.
func TestCreateThatExitsIsRemoved(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("new:1")
	var crash sync.Once
	f.Hook = func(op, target string) {
		if op == enginetest.OpInspect && target == "m.c" {
			crash.Do(func() { f.SetRunning("m.c", false) }) // it crashes once started
		}
	}
	x := Executor{Engine: f, Scope: "s", Settle: 2 * time.Second}
	err := x.Create(ctx, desiredOf(t, "new:1", nil))
	var he *HealthError
	// Its restart policy (the default, unless-stopped) has the engine
	// start it again: a crash loop, whatever it reads at this instant.
	if !errors.As(err, &he) || he.Health != HealthRestarting {
		t.Fatalf("Create = %v, want restarting", err)
	}
	if n := len(f.Containers()); n != 0 {
		t.Errorf("%d containers left, want none", n)
	}
}

// TestHealthBudget is start period + retries × (interval + timeout), with
// the engine's defaults.
func TestHealthBudget(t *testing.T) {
	for _, tt := range []struct {
		h    mesh.Healthcheck
		want time.Duration
	}{
		{mesh.Healthcheck{}, 3 * time.Minute},
		{mesh.Healthcheck{Interval: mesh.Duration(time.Second), Timeout: mesh.Duration(2 * time.Second), Retries: 5,
			StartPeriod: mesh.Duration(10 * time.Second)}, 25 * time.Second},
	} {
		d := desiredOf(t, "x", &mesh.Healthcheck{Test: mesh.HealthTest{"CMD", "true"}, Interval: tt.h.Interval,
			Timeout: tt.h.Timeout, Retries: tt.h.Retries, StartPeriod: tt.h.StartPeriod})
		if got := healthBudget(d.EngineSpec("s").Healthcheck); got != tt.want {
			t.Errorf("budget(%+v) = %v, want %v", tt.h, got, tt.want)
		}
	}
}

// TestRestartedReasonNeverSaysTheResetCode: a crash-looping container seen
// running again has the exit code the engine reset to 0 on restart; the
// reason must not report that 0 as how it failed (a process that exits 3
// once read "restarting: exited 0").
func TestRestartedReasonNeverSaysTheResetCode(t *testing.T) {
	for _, tt := range []struct {
		c    engine.Container
		want string
	}{
		{engine.Container{Restarting: true, ExitCode: 3, RestartCount: 1}, "restarting: exited 3 and was restarted by the engine (restart count 1)"},
		{engine.Container{Running: true, ExitCode: 0, RestartCount: 2}, "restarting: it exited and the engine restarted it (restart count 2)"},
	} {
		if got := restartedReason(tt.c); got != tt.want {
			t.Errorf("restartedReason(%+v) = %q, want %q", tt.c, got, tt.want)
		}
	}
}

// TestRecreateOutageIsStopAndStart: a stop-first recreate makes the new
// container, under its temporary name, before the old one stops, and
// starts it with the very next engine request after the old one's stop:
// the service is down for the stop and the start, nothing else.
func TestRecreateOutageIsStopAndStart(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1", "new:1")
	x := Executor{Engine: f, Scope: "s"}
	if err := x.Create(ctx, desiredOf(t, "old:1", nil)); err != nil {
		t.Fatal(err)
	}
	old, _ := f.Inspect(ctx, "m.c")
	var mu sync.Mutex
	var ops []string
	f.Hook = func(op, target string) {
		mu.Lock()
		defer mu.Unlock()
		ops = append(ops, op+" "+target)
	}
	if err := x.Recreate(ctx, desiredOf(t, "new:1", nil), old); err != nil {
		t.Fatal(err)
	}
	stop := slices.Index(ops, "stop m.c")
	create := slices.Index(ops, "create m.c.meshctl-new")
	if stop < 0 || create < 0 || create > stop || stop+1 >= len(ops) || ops[stop+1] != "start m.c.meshctl-new" {
		t.Errorf("engine requests %q: want the new one created before the old one's stop, and started right after it", ops)
	}
}
