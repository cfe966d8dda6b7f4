package lifecycle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// refusingRemove is an engine whose Remove of one container always fails.
type refusingRemove struct {
	*enginetest.Fake
	id string
}

func (r refusingRemove) Remove(ctx context.Context, id string) error {
	if id == r.id {
		return errors.New("engine says no")
	}
	return r.Fake.Remove(ctx, id)
}

// TestPutBackNeverStartsTheOldBesideTheNew: when the failed new container
// cannot be removed, it still holds the name, and the old one must stay
// aside and stopped: starting it (under its aside name) would run two
// copies of the service on one volume.
func TestPutBackNeverStartsTheOldBesideTheNew(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1", "new:1")
	oldID, err := f.Create(ctx, OldName("m.c"), engine.Spec{Image: "old:1"})
	if err != nil {
		t.Fatal(err)
	}
	newID, err := f.Create(ctx, "m.c", engine.Spec{Image: "new:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, newID); err != nil {
		t.Fatal(err)
	}
	old, err := f.Inspect(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	old.Running = true // it ran before the recreate stopped it
	x := Executor{Engine: refusingRemove{Fake: f, id: newID}}
	err = x.PutBack(ctx, "m.c", newID, old)
	if err == nil || !strings.Contains(err.Error(), "stays aside, stopped") {
		t.Fatalf("PutBack = %v, want a failure saying the old one stays aside", err)
	}
	after, err := f.Inspect(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	if after.Running || after.Name != OldName("m.c") {
		t.Errorf("the old container is %q, running %v: want it aside and stopped", after.Name, after.Running)
	}
}

// renameLost is an engine that carries out its nth Rename and then says it
// failed (the answer lost); with inspectFails, the Inspect that follows it
// fails too, so only a later look can tell.
type renameLost struct {
	*enginetest.Fake
	nth, seen    int
	inspectFails bool
	failNext     bool
}

func (r *renameLost) Rename(ctx context.Context, id, to string) error {
	if err := r.Fake.Rename(ctx, id, to); err != nil {
		return err
	}
	if r.seen++; r.seen == r.nth {
		r.failNext = r.inspectFails
		return errors.New("answer lost")
	}
	return nil
}

func (r *renameLost) Inspect(ctx context.Context, ref string) (engine.Container, error) {
	if r.failNext {
		r.failNext = false
		return engine.Container{}, errors.New("engine unreachable")
	}
	return r.Fake.Inspect(ctx, ref)
}

// TestRecreateRenameAnswerLost: a rename of a recreate that the engine
// carried out though its answer was lost (the fault harness's drop of
// POST /containers/{id}/rename, seed 25099 of its long run) must not
// have the old container started under the aside name beside the service
// the next apply creates. Whichever rename it is, stop-first or
// start-first, the recreate ends with one container of the service, under
// its name, running; where the engine could not say at once (inspect
// failing too), the old one is put back under its name.
func TestRecreateRenameAnswerLost(t *testing.T) {
	for _, startFirst := range []bool{false, true} {
		for nth := 1; nth <= 2; nth++ {
			for _, inspectFails := range []bool{false, true} {
				name := map[bool]string{false: "stop-first", true: "start-first"}[startFirst] +
					map[int]string{1: "/aside", 2: "/to-name"}[nth] + map[bool]string{false: "", true: "/inspect-fails"}[inspectFails]
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					f, desired := orderedHost(t, startFirst, "new:1")
					eng := &renameLost{Fake: f, nth: nth, inspectFails: inspectFails}
					x := Executor{Engine: eng, Scope: "s"}
					err := x.Recreate(ctx, desired("new:1", probe), engineContainer(t, f, "m.c"))
					cs := f.Containers()
					running := 0
					for _, c := range cs {
						if c.Running {
							running++
						}
					}
					c, ok := f.Get("m.c")
					if running != 1 || !ok || !c.Running {
						t.Fatalf("recreate: %v; containers %+v: want one running, under m.c", err, cs)
					}
					if err == nil && c.Spec.Image != "new:1" {
						t.Errorf("recreate succeeded, and m.c is %s", c.Spec.Image)
					}
					if !inspectFails && err != nil {
						t.Errorf("recreate: %v; the rename was done, only its answer lost: want it carried through", err)
					}
				})
			}
		}
	}
}

// stopLost is an engine that carries out every Stop and then says it
// failed (the answer lost).
type stopLost struct{ *enginetest.Fake }

func (e stopLost) Stop(ctx context.Context, id string, grace time.Duration) error {
	if err := e.Fake.Stop(ctx, id, grace); err != nil {
		return err
	}
	return errors.New("answer lost")
}

// TestRecreateStopAnswerLost: a stop of the old container that the engine
// did, though its answer was lost, is asked of the engine: the recreate
// goes on, stop-first or start-first, and leaves the new one alone under
// the name, nothing aside. A start-first recreate used to leave the old one
// as m.c.meshctl-retiring for good, and every later start-first recreate
// of m.c then failed on that name (found by docs/model/window.pml's
// start-first configuration with a lost answer).
func TestRecreateStopAnswerLost(t *testing.T) {
	for _, startFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "stop-first", true: "start-first"}[startFirst], func(t *testing.T) {
			ctx := context.Background()
			f, desired := orderedHost(t, startFirst, "new:1", "new:2")
			x := Executor{Engine: stopLost{f}, Scope: "s"}
			for _, image := range []string{"new:1", "new:2"} {
				if err := x.Recreate(ctx, desired(image, probe), engineContainer(t, f, "m.c")); err != nil {
					t.Fatalf("recreate to %s: %v", image, err)
				}
				cs := f.Containers()
				if len(cs) != 1 || cs[0].Name != "m.c" || !cs[0].Running || cs[0].Spec.Image != image {
					t.Fatalf("after the recreate to %s: %+v, want %s alone under m.c, running", image, cs, image)
				}
			}
		})
	}
}

// TestStartFirstClearsALeftoverRetiring: a container of this state
// directory left under m.c.meshctl-retiring (a recreate that could not
// remove its old one) does not stop the next start-first recreate: it is
// removed, as a stop-first recreate removes a leftover m.c.meshctl-old.
func TestStartFirstClearsALeftoverRetiring(t *testing.T) {
	ctx := context.Background()
	f, x := startFirstHost(t)
	labels := map[string]string{LabelManaged: "s", LabelRole: RoleService, LabelModule: "m", LabelContainer: "c"}
	if _, err := f.Create(ctx, RetiringName("m.c"), engine.Spec{Image: "old:1", Labels: labels}); err != nil {
		t.Fatal(err)
	}
	f.SetHealth("new:1", "healthy", "")
	if err := x.Recreate(ctx, startFirstOf(t, "new:1", probe), engineContainer(t, f, "m.c")); err != nil {
		t.Fatal(err)
	}
	if cs := f.Containers(); len(cs) != 1 || cs[0].Name != "m.c" || cs[0].Spec.Image != "new:1" {
		t.Errorf("containers %+v: want the new m.c alone", cs)
	}
}

// orderedHost is a fake engine where m.c (old:1) runs, made stop-first or
// start-first (startFirstOf), with healthy images news to recreate it
// with; desired makes m.c of an image in the same order.
func orderedHost(t *testing.T, startFirst bool, news ...string) (f *enginetest.Fake, desired func(image string, health *mesh.Healthcheck) *Desired) {
	t.Helper()
	f = enginetest.NewFake(append([]string{"old:1"}, news...)...)
	desired = func(image string, health *mesh.Healthcheck) *Desired {
		if startFirst {
			return startFirstOf(t, image, health)
		}
		return desiredOf(t, image, health)
	}
	if err := (Executor{Engine: f, Scope: "s"}).Create(context.Background(), desired("old:1", nil)); err != nil {
		t.Fatal(err)
	}
	for _, n := range news {
		f.SetHealth(n, "healthy", "")
	}
	return f, desired
}

// flakyLookups is an engine that fails the first inspects and starts of
// one container: a call that hung until its bound, then one answered.
type flakyLookups struct {
	*enginetest.Fake
	id               string
	inspects, starts *int
}

func (f flakyLookups) Inspect(ctx context.Context, id string) (engine.Container, error) {
	if id == f.id && *f.inspects > 0 {
		*f.inspects--
		return engine.Container{}, context.Canceled
	}
	return f.Fake.Inspect(ctx, id)
}

func (f flakyLookups) Start(ctx context.Context, id string) error {
	if id == f.id && *f.starts > 0 {
		*f.starts--
		return context.Canceled
	}
	return f.Fake.Start(ctx, id)
}

// TestPutBackAsksAgain: a put-back whose lookup of the old container
// fails twice (a call that hung, given up on after a signal), and whose
// start of it fails once, asks again with a fresh context each time.
// The old one runs again under its name (harness seed 5151).
func TestPutBackAsksAgain(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1", "new:1")
	oldID, err := f.Create(ctx, "m.c", engine.Spec{Image: "old:1"})
	if err != nil {
		t.Fatal(err)
	}
	newID, err := f.Create(ctx, NewName("m.c"), engine.Spec{Image: "new:1"})
	if err != nil {
		t.Fatal(err)
	}
	old, err := f.Inspect(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	old.Running = true // it ran before the recreate stopped it
	inspects, starts := 2, 1
	x := Executor{Engine: flakyLookups{Fake: f, id: oldID, inspects: &inspects, starts: &starts}}
	err = x.putBackUnmoved(ctx, "m.c", newID, old, errors.New("rename m.c aside: engine says no"))
	if err == nil || !strings.Contains(err.Error(), "the old container was put back") {
		t.Fatalf("putBackUnmoved = %v, want the old container put back", err)
	}
	after, err := f.Inspect(ctx, oldID)
	if err != nil {
		t.Fatal(err)
	}
	if !after.Running || after.Name != "m.c" {
		t.Errorf("the old container is %s as %s, want it running as m.c", after.State, after.Name)
	}
}

// hungRemove is an engine whose first Remove of one container hangs until
// its caller gives up.
type hungRemove struct {
	*enginetest.Fake
	id   string
	hung *bool
}

func (h hungRemove) Remove(ctx context.Context, id string) error {
	if id == h.id && !*h.hung {
		*h.hung = true
		<-ctx.Done()
		return ctx.Err()
	}
	return h.Fake.Remove(ctx, id)
}

// TestPutBackRemovesAgainAfterAHang: a signal came, and the put-back's
// removal of the failed new container hangs. It is given up on after
// SignalGrace and made again with a fresh context. So the new one goes,
// and the old one runs under its name again, not the new one beside an
// old one left aside.
func TestPutBackRemovesAgainAfterAHang(t *testing.T) {
	ctx := context.Background()
	f := enginetest.NewFake("old:1", "new:1")
	oldID, err := f.Create(ctx, OldName("m.c"), engine.Spec{Image: "old:1"})
	if err != nil {
		t.Fatal(err)
	}
	newID, err := f.Create(ctx, NewName("m.c"), engine.Spec{Image: "new:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(ctx, newID); err != nil {
		t.Fatal(err)
	}
	old, _ := f.Inspect(ctx, oldID)
	old.Running = true // it ran before the recreate stopped it
	signalled, cancel := context.WithCancel(ctx)
	cancel()
	hung := false
	x := Executor{Engine: hungRemove{Fake: f, id: newID, hung: &hung}}
	if err := x.PutBack(signalled, "m.c", newID, old); err != nil {
		t.Fatalf("PutBack = %v, want the old one put back", err)
	}
	if _, err := f.Inspect(ctx, newID); !engine.IsNotFound(err) {
		t.Errorf("the failed new container is still there (%v)", err)
	}
	if after, _ := f.Inspect(ctx, oldID); !after.Running || after.Name != "m.c" {
		t.Errorf("the old container is %s as %s, want it running as m.c", after.State, after.Name)
	}
}
