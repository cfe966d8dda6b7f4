package window

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestOpenStopsWhatTheListingSaidWasStopped is the gap docs/model
// found (APPLY_START_IN_FLIGHT): an apply killed mid-recreate sent the start
// of a new container; the window's listing reads it stopped, and the engine
// carries the start out after the listing. The open stops every held
// container whatever the listing said, so it does not run during the step.
func TestOpenStopsWhatTheListingSaidWasStopped(t *testing.T) {
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	stepStart, stepEnd := filepath.Join(dir, "step-start"), filepath.Join(dir, "step-end")
	f, err := mesh.Decode("mesh.yaml", []byte(stepTimesYAML(stepStart, stepEnd)))
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.NewFake(enginetest.Image)
	ctx := context.Background()
	applyFresh(t, d, eng, f)
	// The container reads stopped, as a new one that was created and whose
	// start is still in the engine reads "created".
	if err := eng.Stop(ctx, "store.registry", time.Second); err != nil {
		t.Fatal(err)
	}
	// The engine carries the start out once the window has listed.
	var once sync.Once
	eng.Hook = func(op, target string) {
		if op == enginetest.OpRestart && target == "store.registry" {
			once.Do(func() {
				if err := eng.Start(ctx, "store.registry"); err != nil {
					t.Error(err)
				}
			})
		}
	}
	if _, err := Run(ctx, d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	began := readNanos(t, stepStart)
	// The registry's last start before the step, and a stop after it.
	var startAt, stopAt time.Time
	for _, e := range eng.Events() {
		if e.Name != "store.registry" || e.Err != "" || !e.At.Before(began) {
			continue
		}
		switch e.Op {
		case enginetest.OpStart:
			startAt, stopAt = e.At, time.Time{}
		case enginetest.OpStop:
			stopAt = e.At
		}
	}
	if startAt.IsZero() {
		t.Fatal("the engine's start in flight was not carried out before the step")
	}
	if stopAt.IsZero() {
		t.Fatalf("store.registry ran while the step ran: started at %s and not stopped before the step began at %s; events: %+v",
			startAt.Format(time.StampMicro), began.Format(time.StampMicro), eng.Events())
	}
}

// TestOpenSetsRestartBeforeStop: the open sets a held container's restart
// policy to "no" before it stops it. An engine restarted between a stop and
// the policy change starts a stopped container whose policy is "always"
// (docs/model, BROKEN_STOP_FIRST), mid-step.
func TestOpenSetsRestartBeforeStop(t *testing.T) {
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := mesh.Decode("mesh.yaml", []byte(stepTimesYAML(filepath.Join(dir, "start"), filepath.Join(dir, "end"))))
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.NewFake(enginetest.Image)
	ctx := context.Background()
	applyFresh(t, d, eng, f)
	before := len(eng.Events())
	if _, err := Run(ctx, d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	policyNo := false
	for _, e := range eng.Events()[before:] {
		if e.Name != "store.registry" {
			continue
		}
		if e.Op == enginetest.OpRestart && e.Arg == "no" {
			policyNo = true
		}
		if e.Op == enginetest.OpStop {
			if !policyNo {
				t.Fatalf("store.registry stopped before its restart policy was set to no; events: %+v", eng.Events()[before:])
			}
			return
		}
	}
	t.Fatal("the open never stopped store.registry")
}

// stepTimesYAML is a host of two modules. Step store/gc holds the registry
// and writes to the files its arguments name when it started and when it
// ended (nanoseconds since the epoch); step other/gc holds web and does
// nothing.
func stepTimesYAML(stepStart, stepEnd string) string {
	return fmt.Sprintf(`
modules:
  store:
    containers:
      registry:
        image: %[1]s
    steps:
      gc:
        while-stopped: [registry]
        exec: [/bin/sh, -c, 'date +%%s%%N > "$0"; sleep 0.2; date +%%s%%N > "$1"', %[2]q, %[3]q]
  other:
    containers:
      web:
        image: %[1]s
    steps:
      gc:
        while-stopped: [web]
        exec: ["true"]
`, enginetest.Image, stepStart, stepEnd)
}

// readNanos reads a time the step wrote (date +%s%N).
func readNanos(t *testing.T, path string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the step did not record its time: %v", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(0, ns)
}

// TestOpenHealsADeadClaim: an apply killed in the health gate of its
// recreate of store.registry left its claim dead, the old container aside
// and an unverified new one under the name. The window's open puts the old
// one back before it holds anything, so it holds (and brings back) the
// last good container; the dead claim's part on a container the window
// does not hold stays for the next apply.
func TestOpenHealsADeadClaim(t *testing.T) {
	dir := t.TempDir()
	d, err := state.Open(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := mesh.Decode("mesh.yaml", []byte(stepTimesYAML(filepath.Join(dir, "a"), filepath.Join(dir, "b"))))
	if err != nil {
		t.Fatal(err)
	}
	eng := enginetest.NewFake(enginetest.Image)
	ctx := context.Background()
	applyFresh(t, d, eng, f)
	l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := coord.TakeClaim(l, coord.Claim{Containers: []string{"store.registry", "other.web"}}, time.Now())
	l.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	old, _ := eng.Get("store.registry")
	if err := eng.Stop(ctx, old.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := eng.Rename(ctx, old.ID, lifecycle.OldName("store.registry")); err != nil {
		t.Fatal(err)
	}
	id, err := eng.Create(ctx, "store.registry", old.Spec)
	if err == nil {
		err = eng.Start(ctx, id)
	}
	if err != nil {
		t.Fatal(err)
	}
	h.Abandon() // killed in the gate
	if _, err := Run(ctx, d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	if c, ok := eng.Get("store.registry"); !ok || c.ID != old.ID || !c.Running {
		t.Errorf("store.registry after the window: %+v, want the old one (%s) back, running", c, old.ID)
	}
	if _, ok := eng.Get(lifecycle.OldName("store.registry")); ok {
		t.Error("the old store.registry is still aside")
	}
	if _, err := eng.Inspect(ctx, id); err == nil {
		t.Error("the unverified new store.registry is still there")
	}
	var doc coord.ClaimsDoc
	if _, err := d.Read(coord.ClaimsFile, &doc); err != nil || len(doc.Claims) != 1 || !slices.Equal(doc.Claims[0].Containers, []string{"other.web"}) {
		t.Errorf("claims.json = %+v, %v; want the dead claim's part on other.web kept", doc, err)
	}
}

// removeRefused is an engine whose Remove of one container always fails.
type removeRefused struct {
	*enginetest.Fake
	id string
}

func (e *removeRefused) Remove(ctx context.Context, id string) error {
	if id == e.id {
		return errors.New("engine says no")
	}
	return e.Fake.Remove(ctx, id)
}

// TestOpenRemovesALeftRetiring: a start-first recreate whose retirement
// failed left the old store.registry running as
// store.registry.meshctl-retiring, its apply gone. Held as it is, the
// window would stop store.registry and run its step while the old copy
// answers the service's name. The open removes it before it holds
// anything. When it cannot, the window is refused (exit 1), holding
// nothing and stopping nothing.
func TestOpenRemovesALeftRetiring(t *testing.T) {
	for _, tc := range []struct {
		name   string
		refuse bool
	}{{"removed", false}, {"cannot be removed", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d, err := state.Open(filepath.Join(dir, "state"))
			if err != nil {
				t.Fatal(err)
			}
			f, err := mesh.Decode("mesh.yaml", []byte(stepTimesYAML(filepath.Join(dir, "a"), filepath.Join(dir, "b"))))
			if err != nil {
				t.Fatal(err)
			}
			fake := enginetest.NewFake(enginetest.Image)
			ctx := context.Background()
			applyFresh(t, d, fake, f)
			svc, _ := fake.Get("store.registry")
			left := lifecycle.RetiringName("store.registry")
			leftID, err := fake.Create(ctx, left, svc.Spec)
			if err == nil {
				err = fake.Start(ctx, leftID)
			}
			if err != nil {
				t.Fatal(err)
			}
			var eng engine.Client = fake
			if tc.refuse {
				eng = &removeRefused{Fake: fake, id: leftID}
			}
			_, err = Run(ctx, d, eng, Options{Module: "store", Step: "gc", Lock: state.LockOptions{Timeout: time.Minute}})
			_, there := fake.Get(left)
			if !tc.refuse {
				if err != nil || there {
					t.Fatalf("window: %v; %s there: %v; want it removed and the window run", err, left, there)
				}
				return
			}
			var k interface{ Fault() fault.Kind }
			if err == nil || !strings.Contains(err.Error(), "nothing held") || !strings.Contains(err.Error(), left) || errors.As(err, &k) && k.Fault() != fault.Failed {
				t.Fatalf("window: %v; want it refused (exit 1), naming %s", err, left)
			}
			if c, _ := fake.Get("store.registry"); c.ID != svc.ID || !c.Running {
				t.Errorf("store.registry after the refused window: %+v, want it running, untouched", c)
			}
			if _, err := os.Stat(filepath.Join(dir, "a")); err == nil {
				t.Error("the step ran")
			}
			var holds coord.HoldsDoc
			if _, err := d.Read(coord.HoldsFile, &holds); err != nil || len(holds.Holds) != 0 {
				t.Errorf("holds after the refused window: %+v, %v; want none", holds, err)
			}
		})
	}
}
