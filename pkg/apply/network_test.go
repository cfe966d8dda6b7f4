package apply

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestPlanNetworks is the network plan's rules, one per row.
func TestPlanNetworks(t *testing.T) {
	want := func(module, net string, internal bool) mesh.DesiredNetwork {
		return mesh.DesiredNetwork{Name: mesh.NetworkName(module, net), Module: module, Net: net, Internal: internal}
	}
	have := func(module, net string, internal bool) engine.Network {
		return engine.Network{ID: "id-" + net, Name: mesh.NetworkName(module, net), Internal: internal,
			Labels: map[string]string{lifecycle.LabelModule: module, lifecycle.LabelNetwork: net}}
	}
	owns := map[string]bool{"m": true, "gone": true}
	for _, tt := range []struct {
		name string
		in   NetInput
		want map[string]Action // engine name → action
	}{
		{"missing is created", NetInput{Desired: []mesh.DesiredNetwork{want("m", "a", false)}, Modules: owns},
			map[string]Action{"meshctl.m.a": Create}},
		{"present is unchanged", NetInput{Desired: []mesh.DesiredNetwork{want("m", "a", true)},
			Observed: []engine.Network{have("m", "a", true)}, Modules: owns}, map[string]Action{"meshctl.m.a": Unchanged}},
		{"changed definition is made again", NetInput{Desired: []mesh.DesiredNetwork{want("m", "a", true)},
			Observed: []engine.Network{have("m", "a", false)}, Modules: owns}, map[string]Action{"meshctl.m.a": Recreate}},
		{"left out is an orphan", NetInput{Observed: []engine.Network{have("m", "a", false)}, Modules: owns},
			map[string]Action{"meshctl.m.a": Orphan}},
		{"left out, pruned", NetInput{Observed: []engine.Network{have("m", "a", false)}, Modules: owns, Prune: true},
			map[string]Action{"meshctl.m.a": Remove}},
		{"module removed", NetInput{Observed: []engine.Network{have("gone", "a", false)}, Modules: owns,
			Remove: map[string]bool{"gone": true}}, map[string]Action{"meshctl.gone.a": Remove}},
		{"another module's is left alone, pruned or not", NetInput{Observed: []engine.Network{have("other", "a", false)},
			Modules: owns, Prune: true}, map[string]Action{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]Action{}
			for _, it := range PlanNetworks(tt.in) {
				got[it.Name] = it.Action
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("PlanNetworks = %v, want %v", got, tt.want)
			}
		})
	}
}

const netFile = `
modules:
  m:
    networks:
      default: {}
    containers:
      db: {image: meshtest/busybox:1, networks: [default]}
      api:
        image: meshtest/busybox:1
        depends-on: [db]
        networks:
          default: {aliases: [backend]}
`

func decodeMesh(t *testing.T, src string) *mesh.File {
	t.Helper()
	f, err := mesh.Decode("mesh.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestRunNetworks: the network is created before the containers, each
// container joins it under its short name, its engine name and its
// aliases; the network is labelled as this state directory's; the same
// file again asks for no network change; --remove-module removes it after
// the containers.
func TestRunNetworks(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	f := decodeMesh(t, netFile)
	rep, err := run(t, d, eng, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	changes := eng.Changes()
	if i := slices.Index(changes, "create-network meshctl.m.default"); i != 0 {
		t.Errorf("engine changes %v: the network is not created first", changes)
	}
	if len(rep.Networks) != 1 || rep.Networks[0].Action != Create {
		t.Errorf("report networks %+v, want one create", rep.Networks)
	}
	api, _ := eng.Get("m.api")
	if got, want := api.Spec.Networks, map[string][]string{"meshctl.m.default": {"api", "m.api", "backend"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("m.api joins %v, want %v", got, want)
	}
	nets := eng.NetworkList()
	id, _ := d.ID()
	if len(nets) != 1 || nets[0].Labels[lifecycle.LabelManaged] != id || nets[0].Labels[lifecycle.LabelModule] != "m" {
		t.Errorf("networks %+v: want one, labelled as managed by %s, module m", nets, id)
	}

	eng.ResetCalls()
	if rep, err = run(t, d, eng, f, nil); err != nil || rep.Changed {
		t.Fatalf("the same file again: changed %v, err %v", rep.Changed, err)
	}
	if rep.EngineCalls != 3 {
		t.Errorf("the same file again: %d engine calls, want 3 (ping, list, networks)", rep.EngineCalls)
	}
	if c := eng.Changes(); len(c) > 0 {
		t.Errorf("the same file again changed the engine: %v", c)
	}

	rep, err = run(t, d, eng, f, func(o *Options) { o.File, o.RemoveModules = decodeMesh(t, "modules: {}"), []string{"m"} })
	if err != nil {
		t.Fatal(err)
	}
	changes = eng.Changes()
	if last := changes[len(changes)-1]; last != "remove-network meshctl.m.default" {
		t.Errorf("engine changes %v: the network is not removed last", changes)
	}
	if len(eng.NetworkList()) != 0 {
		t.Errorf("networks left: %v", eng.NetworkList())
	}
}

// TestRunNetworkRefusals: what the network plan cannot do is refused
// before anything changes.
func TestRunNetworkRefusals(t *testing.T) {
	t.Run("a network meshctl did not create has the name", func(t *testing.T) {
		d, eng := stateDir(t), enginetest.NewFake(busybox)
		eng.AddNetwork("meshctl.m.default", nil)
		_, err := run(t, d, eng, decodeMesh(t, netFile), nil)
		if ce := (*NetworkConflictError)(nil); !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a NetworkConflictError", err)
		}
		if c := eng.Changes(); len(c) > 0 {
			t.Errorf("changes %v, want none", c)
		}
	})
	t.Run("an external network is missing", func(t *testing.T) {
		d, eng := stateDir(t), enginetest.NewFake(busybox)
		f := decodeMesh(t, "modules:\n  m:\n    networks: {edge: {external: proxy}}\n    containers:\n      a: {image: meshtest/busybox:1, networks: [edge]}\n")
		_, err := run(t, d, eng, f, nil)
		if err == nil || !strings.Contains(err.Error(), "m.a joins network proxy, which does not exist; it is external") {
			t.Fatalf("err = %v", err)
		}
		if c := eng.Changes(); len(c) > 0 {
			t.Errorf("changes %v, want none", c)
		}
		eng.AddNetwork("proxy", nil)
		if _, err := run(t, d, eng, f, nil); err != nil {
			t.Fatal(err)
		}
		if c := eng.Changes(); slices.ContainsFunc(c, func(s string) bool { return strings.Contains(s, "network") }) {
			t.Errorf("changes %v: an external network is never created", c)
		}
	})
	t.Run("a changed definition with a container outside meshctl on it", func(t *testing.T) {
		d, eng := stateDir(t), enginetest.NewFake(busybox)
		if _, err := run(t, d, eng, decodeMesh(t, netFile), nil); err != nil {
			t.Fatal(err)
		}
		id, err := eng.Create(context.Background(), "foreign", engine.Spec{Image: busybox, Networks: map[string][]string{"meshctl.m.default": nil}})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		eng.Changes()
		_, err = run(t, d, eng, decodeMesh(t, strings.Replace(netFile, "default: {}", "default: {internal: true}", 1)), nil)
		if ce := (*ChangedNetworkError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), "foreign, which meshctl does not manage here, is attached") {
			t.Fatalf("err = %v, want a ChangedNetworkError naming foreign", err)
		}
		if c := eng.Changes(); len(c) > 0 {
			t.Errorf("changes %v, want none", c)
		}
	})
	t.Run("a changed definition with a window's step container on it", func(t *testing.T) {
		d, eng := stateDir(t), enginetest.NewFake(busybox)
		if _, err := run(t, d, eng, decodeMesh(t, netFile), nil); err != nil {
			t.Fatal(err)
		}
		scope, err := d.ID()
		if err != nil {
			t.Fatal(err)
		}
		step := engine.Spec{Image: busybox, Networks: map[string][]string{"meshctl.m.default": nil}, Labels: map[string]string{
			lifecycle.LabelManaged: scope, lifecycle.LabelRole: lifecycle.RoleStep, lifecycle.LabelModule: "m"}}
		id, err := eng.Create(context.Background(), "meshctl-window.m.gc", step)
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		eng.Changes()
		_, err = run(t, d, eng, decodeMesh(t, strings.Replace(netFile, "default: {}", "default: {internal: true}", 1)), nil)
		want := "the step container meshctl-window.m.gc of a window on module m is attached to it: apply again once the window has closed"
		if ce := (*ChangedNetworkError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want a ChangedNetworkError naming the step container", err)
		}
		if strings.Contains(err.Error(), "does not manage here") || strings.Contains(err.Error(), "disconnect") {
			t.Errorf("err = %v: a step container is meshctl's, and no one should disconnect it", err)
		}
		if c := eng.Changes(); len(c) > 0 {
			t.Errorf("changes %v, want none", c)
		}
	})
	t.Run("a changed definition with a container of a module this apply does not converge on it", func(t *testing.T) {
		d, eng := stateDir(t), enginetest.NewFake(busybox)
		other := "\n  o:\n    containers:\n      x: {image: meshtest/busybox:1, networks: [m/default]}\n"
		if _, err := run(t, d, eng, decodeMesh(t, netFile+other), nil); err != nil {
			t.Fatal(err)
		}
		eng.Changes()
		changed := strings.Replace(netFile, "default: {}", "default: {internal: true}", 1)
		_, err := run(t, d, eng, decodeMesh(t, changed), nil)
		if ce := (*ChangedNetworkError)(nil); !errors.As(err, &ce) ||
			!strings.Contains(err.Error(), "o.x of module o, which this apply does not converge, joins it: apply module o in the same file as module m") {
			t.Fatalf("err = %v, want a ChangedNetworkError naming o.x and module o", err)
		}
		if c := eng.Changes(); len(c) > 0 {
			t.Errorf("changes %v, want none: module o's container is left alone", c)
		}
		// Both modules in one file: o.x is in the plan, recreated with the
		// new definition in its spec.
		rep, err := run(t, d, eng, decodeMesh(t, changed+other), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := actions(rep); got["o.x"] != Recreate || got["m.db"] != Recreate {
			t.Errorf("actions %v, want o.x and m.db recreated", got)
		}
	})
	t.Run("a changed definition while a window holds a container on it", func(t *testing.T) {
		d, eng := stateDir(t), enginetest.NewFake(busybox)
		if _, err := run(t, d, eng, decodeMesh(t, netFile), nil); err != nil {
			t.Fatal(err)
		}
		defer liveWindow(t, d, "m.db", "unless-stopped").Unlock()
		eng.Changes()
		_, err := run(t, d, eng, decodeMesh(t, strings.Replace(netFile, "default: {}", "default: {internal: true}", 1)), nil)
		if ce := (*ChangedNetworkError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), "m.db joins it and window w-1 holds it") {
			t.Fatalf("err = %v, want a ChangedNetworkError naming m.db and window w-1", err)
		}
		if c := eng.Changes(); len(c) > 0 {
			t.Errorf("changes %v, want none: the held container is not taken off the network", c)
		}
	})
}

// TestRunNetworkChanged: a changed internal flag makes the network again
// (the engine changes none in place), before any container: its containers
// are stopped (dependents first), taken off it, joined to the new one under
// the same names and started again in depends-on order; then recreated,
// health-gated, with the new definition in their spec. A dry run says so
// and changes nothing.
func TestRunNetworkChanged(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, eng, decodeMesh(t, netFile), nil); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	changed := decodeMesh(t, strings.Replace(netFile, "default: {}", "default: {internal: true}", 1))
	rep, err := run(t, d, eng, changed, func(o *Options) { o.DryRun = true })
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Networks) != 1 || rep.Networks[0].Action != Recreate || rep.Networks[0].Reasons[0] != "internal: false → true" {
		t.Errorf("dry run: networks %+v, want a recreate, internal: false → true", rep.Networks)
	}
	if got := actions(rep); got["m.db"] != Recreate || got["m.api"] != Recreate {
		t.Errorf("dry run: actions %v, want both recreated", got)
	}
	if c := eng.Changes(); len(c) > 0 {
		t.Errorf("dry run changed %v", c)
	}

	if rep, err = run(t, d, eng, changed, nil); err != nil {
		t.Fatal(err)
	}
	changes := strings.Join(eng.Changes(), "\n")
	if !strings.HasPrefix(changes, "stop m.api\ndisconnect m.api meshctl.m.default\nstop m.db\ndisconnect m.db meshctl.m.default\n"+
		"remove-network meshctl.m.default\ncreate-network meshctl.m.default\nconnect m.db meshctl.m.default\nstart m.db\n"+
		"connect m.api meshctl.m.default\nstart m.api\n") {
		t.Errorf("engine changes:\n%s", changes)
	}
	nets := eng.NetworkList()
	if len(nets) != 1 || !nets[0].Internal || !slices.Equal(nets[0].Containers, []string{"m.api", "m.db"}) {
		t.Errorf("networks %+v, want meshctl.m.default internal, with m.api and m.db", nets)
	}
	if rep, err = run(t, d, eng, changed, nil); err != nil || rep.Changed {
		t.Errorf("the same file again: changed %v, %v", rep.Changed, err)
	}
}

// TestRunNetworkRenamed is the way to change a network without a stop: the
// network renamed (and its definition changed), its containers are
// recreated onto the new one, created first, and --prune removes the old
// one once they have left it.
func TestRunNetworkRenamed(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, eng, decodeMesh(t, netFile), nil); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	renamed := strings.ReplaceAll(strings.Replace(netFile, "default: {}", "main: {internal: true}", 1), "default", "main")
	rep, err := run(t, d, eng, decodeMesh(t, renamed), func(o *Options) { o.Prune = true })
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(rep); got["m.db"] != Recreate || got["m.api"] != Recreate {
		t.Errorf("actions %v, want both recreated", got)
	}
	changes := eng.Changes()
	if changes[0] != "create-network meshctl.m.main" || changes[len(changes)-1] != "remove-network meshctl.m.default" {
		t.Errorf("engine changes %v: want the new network first, the old one removed last", changes)
	}
	nets := eng.NetworkList()
	if len(nets) != 1 || nets[0].Name != "meshctl.m.main" || !nets[0].Internal {
		t.Errorf("networks %+v, want only meshctl.m.main, internal", nets)
	}
}

// TestRunNetworkKept: a module's network that a container outside meshctl
// is attached to is kept when the module is removed, with a warning that
// says which container and what removes it; once unused, --remove-module of
// that module (of which only the network is left) removes it.
func TestRunNetworkKept(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, eng, decodeMesh(t, netFile), nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, err := eng.Create(ctx, "foreign", engine.Spec{Image: busybox, Networks: map[string][]string{"meshctl.m.default": nil}})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	var warned []string
	remove := func(o *Options) {
		o.File, o.RemoveModules = decodeMesh(t, "modules: {}"), []string{"m"}
		o.Warn = func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) }
	}
	rep, err := run(t, d, eng, nil, remove)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Networks) != 1 || rep.Networks[0].Action != Kept || !slices.Contains(rep.Networks[0].Reasons, "still in use by foreign") {
		t.Errorf("networks %+v, want meshctl.m.default kept, in use by foreign", rep.Networks)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "network meshctl.m.default kept: containers are attached to it (foreign); "+
		"once they are gone, apply --remove-module m removes it") {
		t.Errorf("warnings %q", warned)
	}
	if c := eng.Changes(); slices.ContainsFunc(c, func(s string) bool { return strings.HasPrefix(s, "remove-network") }) {
		t.Errorf("changes %v: the network was removed under a container", c)
	}
	if err := eng.Remove(ctx, id); err != nil {
		t.Fatal(err)
	}
	if rep, err = run(t, d, eng, nil, remove); err != nil {
		t.Fatal(err)
	}
	if len(rep.Networks) != 1 || rep.Networks[0].Action != Remove || len(eng.NetworkList()) != 0 {
		t.Errorf("once unused: networks %+v, left %v", rep.Networks, eng.NetworkList())
	}
}

// failingNetCreate is a fake engine whose first network create fails.
type failingNetCreate struct {
	*enginetest.Fake
	failed bool
}

func (f *failingNetCreate) CreateNetwork(ctx context.Context, name string, spec engine.NetworkSpec) (string, error) {
	if !f.failed {
		f.failed = true
		return "", errors.New("engine says no")
	}
	return f.Fake.CreateNetwork(ctx, name, spec)
}

// TestRunNetworkReplacePutBack: a replace whose new network cannot be
// made puts back what it stopped: the network made again as it was, its
// containers on it under their aliases, running. The apply fails, and its
// report says what was put back, not recreate.
func TestRunNetworkReplacePutBack(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, fake, decodeMesh(t, netFile), nil); err != nil {
		t.Fatal(err)
	}
	eng := &failingNetCreate{Fake: fake}
	rep, err := run(t, d, eng, decodeMesh(t, strings.Replace(netFile, "default: {}", "default: {internal: true}", 1)), nil)
	if fe := (*FailedError)(nil); !errors.As(err, &fe) || !strings.Contains(err.Error(), "put back as it was (internal: false)") {
		t.Fatalf("err = %v, want a FailedError saying the network was put back", err)
	}
	for _, name := range []string{"m.db", "m.api"} {
		if c, ok := fake.Get(name); !ok || !c.Running {
			t.Errorf("%s is not running after the put-back", name)
		}
	}
	if api, _ := fake.Get("m.api"); !slices.Equal(api.Spec.Networks["meshctl.m.default"], []string{"api", "m.api", "backend"}) {
		t.Errorf("m.api joins %v, want its aliases back", api.Spec.Networks)
	}
	if nets := fake.NetworkList(); len(nets) != 1 || nets[0].Internal {
		t.Errorf("networks %+v, want meshctl.m.default as it was", nets)
	}
	for _, c := range rep.Containers {
		if c.Action != Failed || !strings.Contains(c.Error, "put back, running on the network again") {
			t.Errorf("report %s: %s %q, want failed and put back", c.Name, c.Action, c.Error)
		}
	}
	if n := rep.Networks; len(n) != 1 || n[0].Action != Failed {
		t.Errorf("report networks %+v, want the network failed", n)
	}
}

// TestRunNetworkReplacePutBackUnhealthy: a container the put-back starts
// but whose gate fails is reported as started and unhealthy, not as put
// back, and not as left stopped.
func TestRunNetworkReplacePutBackUnhealthy(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	probed := strings.Replace(netFile, "db: {image: meshtest/busybox:1, networks: [default]}",
		"db: {image: meshtest/busybox:1, networks: [default], healthcheck: {test: [CMD, \"true\"]}}", 1)
	fake.SetHealth(busybox, "healthy", "")
	if _, err := run(t, d, fake, decodeMesh(t, probed), nil); err != nil {
		t.Fatal(err)
	}
	fake.SetHealth(busybox, "unhealthy", "probe said no")
	eng := &failingNetCreate{Fake: fake}
	rep, err := run(t, d, eng, decodeMesh(t, strings.Replace(probed, "default: {}", "default: {internal: true}", 1)), nil)
	want := "put back and started, but unhealthy: probe said no; the next apply tries again"
	if err == nil || !strings.Contains(err.Error(), "m.db: "+want) {
		t.Fatalf("err = %v, want it to say m.db was started but is unhealthy", err)
	}
	if c, ok := fake.Get("m.db"); !ok || !c.Running {
		t.Errorf("m.db is not running")
	}
	for _, c := range rep.Containers {
		if c.Name == "m.db" && !strings.HasSuffix(c.Error, want) {
			t.Errorf("report m.db: %q, want it to end %q", c.Error, want)
		}
	}
}
