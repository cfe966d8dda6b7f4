package lifecycle

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// startFirstOf is m.c on the module network meshctl.m.net, start-first,
// with a drain of 1ms.
func startFirstOf(t *testing.T, image string, health *mesh.Healthcheck) *Desired {
	t.Helper()
	d := desiredOf(t, image, health)
	d.Def.UpdateOrder = mesh.StartFirst
	d.Def.Drain = mesh.Duration(time.Millisecond)
	d.Spec.Networks = map[string]mesh.SpecNetwork{"meshctl.m.net": {}}
	return d
}

// startFirstHost is a fake engine where m.c (old:1) runs on meshctl.m.net.
func startFirstHost(t *testing.T) (*enginetest.Fake, Executor) {
	t.Helper()
	f := enginetest.NewFake("old:1", "new:1")
	x := Executor{Engine: f, Scope: "s"}
	if err := x.Create(context.Background(), startFirstOf(t, "old:1", nil)); err != nil {
		t.Fatal(err)
	}
	f.Changes()
	return f, x
}

// TestRecreateStartFirst: the old container runs until the new one, on the
// same network under the same aliases, has started and passed its gate;
// only then does the old one leave the network, stop and go, and the new
// one takes the name.
func TestRecreateStartFirst(t *testing.T) {
	ctx := context.Background()
	f, x := startFirstHost(t)
	old, _ := f.Get("m.c")
	f.SetHealth("new:1", "healthy", "")
	if err := x.Recreate(ctx, startFirstOf(t, "new:1", probe), engineContainer(t, f, "m.c")); err != nil {
		t.Fatal(err)
	}
	ch := f.Changes()
	start := slices.Index(ch, "start m.c.meshctl-new")
	stop := slices.IndexFunc(ch, func(s string) bool { return strings.HasPrefix(s, "stop m.c") })
	leave := slices.IndexFunc(ch, func(s string) bool { return strings.HasPrefix(s, "disconnect m.c") })
	if start < 0 || leave < 0 || stop < 0 || !(start < leave && leave < stop) {
		t.Errorf("engine requests %q: want the new one started, then the old one off the network, then stopped", ch)
	}
	cs := f.Containers()
	if len(cs) != 1 || cs[0].Name != "m.c" || cs[0].ID == old.ID || !cs[0].Running || cs[0].Spec.Image != "new:1" {
		t.Errorf("containers %+v: want the new m.c alone, running", cs)
	}
}

// TestRecreateStartFirstUnhealthy: a new container that fails its gate is
// removed; the old one is never stopped, renamed or taken off its network.
func TestRecreateStartFirstUnhealthy(t *testing.T) {
	ctx := context.Background()
	f, x := startFirstHost(t)
	old, _ := f.Get("m.c")
	f.SetHealth("new:1", "unhealthy", "probe says no\n")
	if err := x.Recreate(ctx, startFirstOf(t, "new:1", probe), engineContainer(t, f, "m.c")); err == nil {
		t.Fatal("Recreate of an unhealthy new version succeeded")
	}
	for _, c := range f.Changes() {
		if op := strings.Fields(c); len(op) >= 2 && op[1] == "m.c" && op[0] != "inspect" {
			t.Errorf("the old container was touched: %q", c)
		}
	}
	cs := f.Containers()
	if len(cs) != 1 || cs[0].ID != old.ID || !cs[0].Running {
		t.Errorf("containers %+v: want the old m.c alone, running", cs)
	}
}

// engineContainer is the engine's view of name, as a plan hands it over.
func engineContainer(t *testing.T, f *enginetest.Fake, name string) engine.Container {
	t.Helper()
	c, err := f.Inspect(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRetireLeavesAliasesBeforeStop: the old container leaves its network
// and joins it again without aliases before it stops. So the aliases answer
// with the new one only while the old one still serves what is in flight.
func TestRetireLeavesAliasesBeforeStop(t *testing.T) {
	ctx := context.Background()
	f, x := startFirstHost(t)
	f.SetHealth("new:1", "healthy", "")
	if err := x.Recreate(ctx, startFirstOf(t, "new:1", probe), engineContainer(t, f, "m.c")); err != nil {
		t.Fatal(err)
	}
	var old []string
	for _, c := range f.Changes() {
		if op := strings.Fields(c); len(op) >= 2 && op[1] == "m.c.meshctl-retiring" {
			old = append(old, c)
		}
	}
	want := []string{
		"disconnect m.c.meshctl-retiring meshctl.m.net",
		"connect m.c.meshctl-retiring meshctl.m.net",
		"stop m.c.meshctl-retiring",
		"remove m.c.meshctl-retiring",
	}
	if !slices.Equal(old, want) {
		t.Errorf("engine requests on the old container %q, want %q", old, want)
	}
	if c, _ := f.Get("m.c"); !slices.Contains(c.Spec.Networks["meshctl.m.net"], "c") {
		t.Errorf("new m.c networks %v: want it under the alias c", c.Spec.Networks)
	}
}
