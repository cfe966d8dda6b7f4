package apply

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

const (
	scope      = "0123456789abcdef"
	otherScope = "fedcba9876543210"
	// secret is an env value: no reason may ever repeat it.
	secret = "s3cr3t-value-of-FOO"
)

// web is a container with every field of a spec set.
func web() *mesh.Container {
	return &mesh.Container{
		Image:      "meshtest/busybox:1",
		Entrypoint: []string{"/bin/sh", "-c"},
		Command:    []string{"sleep 3600"},
		Env:        map[string]string{"FOO": secret, "BAR": "bar"},
		Volumes:    []string{"web-data:/data", "/srv/conf:/etc/conf:ro"},
		Network:    "host",
		Ports:      []string{"127.0.0.1:8080:8080"},
		Restart:    "always",
		Labels:     map[string]string{"team": "infra"},
	}
}

// want returns the desired containers of a file made of module "m" with cs.
func want(t testing.TB, cs map[string]*mesh.Container) []lifecycle.Desired {
	t.Helper()
	f := &mesh.File{Modules: map[string]*mesh.Module{"m": {Containers: cs}}}
	ds, err := record.Desire(f, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// running is the container apply would have made for c, named m.NAME, in
// scope, running.
func running(t testing.TB, name string, c *mesh.Container) engine.Container {
	t.Helper()
	d := want(t, map[string]*mesh.Container{name: c})[0]
	return engine.Container{
		ID:      "id-" + d.Name,
		Name:    d.Name,
		Image:   d.Image,
		State:   "running",
		Running: true,
		Labels:  d.EngineSpec(scope).Labels,
	}
}

// asideAs is c set aside by a changed hold, as NAME.meshctl-held.
func asideAs(c engine.Container) engine.Container {
	c.ID, c.Name = c.ID+"-aside", lifecycle.HeldName(c.Name)
	return c
}

func stopped(c engine.Container) engine.Container {
	c.State, c.Running = "exited", false
	return c
}

func inScope(c engine.Container, s string) engine.Container {
	c.Labels = maps.Clone(c.Labels)
	c.Labels[lifecycle.LabelManaged] = s
	return c
}

func withLabel(c engine.Container, k, v string) engine.Container {
	c.Labels = maps.Clone(c.Labels)
	c.Labels[k] = v
	return c
}

func changed(change func(c *mesh.Container)) *mesh.Container {
	c := web()
	change(c)
	return c
}

type line struct {
	name    string
	action  Action
	reasons []string
	window  string
}

func (l line) String() string {
	s := fmt.Sprintf("%s %s %q", l.name, l.action, l.reasons)
	if l.window != "" {
		s += " window " + l.window
	}
	return s
}

func lines(items []Item) []line {
	out := []line{}
	for _, it := range items {
		out = append(out, line{it.Name, it.Action, it.Reasons, it.Window})
	}
	return out
}

func TestPlan(t *testing.T) {
	for _, tt := range []struct {
		name     string
		desired  map[string]*mesh.Container
		observed []engine.Container
		holds    map[string]HoldRef
		taken    []string
		prune    bool
		want     []line
	}{
		{
			name:    "missing is created",
			desired: map[string]*mesh.Container{"a": web()},
			want:    []line{{"m.a", Create, nil, ""}},
		},
		{
			name:     "running with the same spec is unchanged",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{running(t, "a", web())},
			want:     []line{{"m.a", Unchanged, nil, ""}},
		},
		{
			name:     "paused counts as running",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{func() engine.Container { c := running(t, "a", web()); c.State = "paused"; return c }()},
			want:     []line{{"m.a", Unchanged, nil, ""}},
		},
		{
			// The engine counts restarting as running; a crash loop is not
			// converged.
			name:     "restarting is recreated",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{func() engine.Container { c := running(t, "a", web()); c.State = "restarting"; return c }()},
			want:     []line{{"m.a", Recreate, []string{ReasonRestarting}, ""}},
		},
		{
			name:     "stopped and not held is recreated",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{stopped(running(t, "a", web()))},
			want:     []line{{"m.a", Recreate, []string{ReasonNotRunning}, ""}},
		},
		{
			name:     "created but never started is recreated",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{func() engine.Container { c := stopped(running(t, "a", web())); c.State = "created"; return c }()},
			want:     []line{{"m.a", Recreate, []string{ReasonNotRunning}, ""}},
		},
		{
			name:     "stopped with a changed spec names the fields",
			desired:  map[string]*mesh.Container{"a": changed(func(c *mesh.Container) { c.Image = "meshtest/busybox:2" })},
			observed: []engine.Container{stopped(running(t, "a", web()))},
			want:     []line{{"m.a", Recreate, []string{"image: meshtest/busybox:1 -> meshtest/busybox:2"}, ""}},
		},
		{
			name: "every differing field is named, in a stable order",
			desired: map[string]*mesh.Container{"a": changed(func(c *mesh.Container) {
				c.Image = "meshtest/busybox:2"
				c.Entrypoint = []string{"/bin/ash", "-c"}
				c.Command = []string{"sleep 7200"}
				c.Env = map[string]string{"FOO": secret + "-rotated", "NEW": "x"} // BAR dropped
				c.Volumes = []string{"web-data:/data"}
				c.Network = "none"
				c.Ports = nil
				c.Restart = "on-failure"
				c.Labels = map[string]string{"team": "web", "tier": "front"}
			})},
			observed: []engine.Container{running(t, "a", web())},
			want: []line{{"m.a", Recreate, []string{"image: meshtest/busybox:1 -> meshtest/busybox:2", "entrypoint", "command", "env.BAR", "env.FOO", "env.NEW",
				"volumes", "network", "ports", "restart", "labels.team", "labels.tier"}, ""}},
		},
		{
			name:     "a held container is left as it is, though stopped",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{stopped(running(t, "a", web()))},
			holds:    map[string]HoldRef{"m.a": {Window: "w-1"}},
			want:     []line{{"m.a", Held, []string{"held by window w-1"}, "w-1"}},
		},
		{
			name:     "a held container is left as it is, running",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{running(t, "a", web())},
			holds:    map[string]HoldRef{"m.a": {Window: "w-1"}},
			want:     []line{{"m.a", Held, []string{"held by window w-1"}, "w-1"}},
		},
		{
			name:     "a held container whose spec changed is deferred",
			desired:  map[string]*mesh.Container{"a": changed(func(c *mesh.Container) { c.Env["FOO"] = "other" })},
			observed: []engine.Container{stopped(running(t, "a", web()))},
			holds:    map[string]HoldRef{"m.a": {Window: "w-1"}},
			want:     []line{{"m.a", Deferred, []string{"held by window w-1", "env.FOO"}, "w-1"}},
		},
		{
			name:     "a container held changed is held, its copy and the normal one aside alike",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{running(t, "a", changed(func(c *mesh.Container) { c.Env["FOO"] = "read-only" })), asideAs(stopped(running(t, "a", web())))},
			holds:    map[string]HoldRef{"m.a": {Window: "w-1", Changed: true}},
			want:     []line{{"m.a", Held, []string{"held changed by window w-1"}, "w-1"}},
		},
		{
			name:     "a container held changed whose normal spec changed is deferred, with its change",
			desired:  map[string]*mesh.Container{"a": changed(func(c *mesh.Container) { c.Command = []string{"other"} })},
			observed: []engine.Container{running(t, "a", changed(func(c *mesh.Container) { c.Env["FOO"] = "read-only" })), asideAs(stopped(running(t, "a", web())))},
			holds:    map[string]HoldRef{"m.a": {Window: "w-1", Changed: true}},
			want:     []line{{"m.a", Deferred, []string{"held changed by window w-1", "command"}, "w-1"}},
		},
		{
			name:     "a normal container aside with no hold is no orphan, even with --prune",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{running(t, "a", web()), asideAs(stopped(running(t, "a", web())))},
			prune:    true,
			want:     []line{{"m.a", Unchanged, nil, ""}},
		},
		{
			name:    "a held container that is missing is deferred, not created",
			desired: map[string]*mesh.Container{"a": web()},
			holds:   map[string]HoldRef{"m.a": {Window: "w-1"}},
			want:    []line{{"m.a", Deferred, []string{"held by window w-1", "missing: created when the window closes"}, "w-1"}},
		},
		{
			name: "a change depending on a held container is deferred, and so is one depending on that",
			desired: map[string]*mesh.Container{
				"a": web(),
				"b": changed(func(c *mesh.Container) { c.Env["FOO"] = "other"; c.DependsOn = []string{"a"} }),
				"c": changed(func(c *mesh.Container) { c.DependsOn = []string{"b"} }),
				"d": changed(func(c *mesh.Container) { c.DependsOn = []string{"other.x"} }),
				"e": changed(func(c *mesh.Container) { c.DependsOn = []string{"a"} }),
			},
			observed: []engine.Container{stopped(running(t, "a", web())), running(t, "b", web()),
				running(t, "e", changed(func(c *mesh.Container) { c.DependsOn = []string{"a"} }))},
			holds: map[string]HoldRef{"m.a": {Window: "w-1"}, "other.x": {Window: "w-2"}},
			want: []line{
				{"m.a", Held, []string{"held by window w-1"}, "w-1"},
				{"m.b", Deferred, []string{"depends on m.a, held by window w-1", "env.FOO"}, "w-1"},
				{"m.c", Deferred, []string{"depends on m.b, whose change waits for window w-1 to close"}, "w-1"},
				{"m.d", Deferred, []string{"depends on other.x, held by window w-2"}, "w-2"},
				{"m.e", Unchanged, nil, ""},
			},
		},
		{
			name:     "a hold on another container holds nothing here",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{stopped(running(t, "a", web()))},
			holds:    map[string]HoldRef{"m.b": {Window: "w-1"}},
			want:     []line{{"m.a", Recreate, []string{ReasonNotRunning}, ""}},
		},
		{
			name:     "not in the file: orphan",
			observed: []engine.Container{running(t, "gone", web())},
			want:     []line{{"m.gone", Orphan, []string{"not in the mesh file; --prune removes it"}, ""}},
		},
		{
			name:     "not in the file, stopped: still an orphan, not recreated",
			observed: []engine.Container{stopped(running(t, "gone", web()))},
			want:     []line{{"m.gone", Orphan, []string{"not in the mesh file; --prune removes it"}, ""}},
		},
		{
			name:     "not in the file with --prune: removed",
			observed: []engine.Container{running(t, "gone", web())},
			prune:    true,
			want:     []line{{"m.gone", Remove, []string{"not in the mesh file"}, ""}},
		},
		{
			name:     "not in the file and held, with --prune: held",
			observed: []engine.Container{stopped(running(t, "gone", web()))},
			holds:    map[string]HoldRef{"m.gone": {Window: "w-1"}},
			prune:    true,
			want:     []line{{"m.gone", Held, []string{"held by window w-1; no longer in the mesh file"}, "w-1"}},
		},
		{
			name:    "an unmanaged container owns the name: conflict",
			desired: map[string]*mesh.Container{"a": web(), "b": web()},
			taken:   []string{"m.b"},
			want: []line{
				{"m.a", Create, nil, ""},
				{"m.b", Conflict, []string{"a container meshctl does not manage is named m.b; rename or remove it"}, ""},
			},
		},
		{
			name: "a window's step container is not a service: ignored",
			observed: []engine.Container{
				withLabel(running(t, "a.step", web()), lifecycle.LabelRole, lifecycle.RoleStep),
			},
			prune: true,
			want:  []line{},
		},
		{
			name:     "a step container of a desired name does not make it exist",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{withLabel(running(t, "a", web()), lifecycle.LabelRole, lifecycle.RoleStep)},
			want:     []line{{"m.a", Create, nil, ""}},
		},
		{
			name:    "containers of another state dir are ignored, even with --prune",
			desired: map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{
				inScope(running(t, "a", web()), otherScope),
				inScope(running(t, "other", web()), otherScope),
				withLabel(running(t, "unlabelled", web()), lifecycle.LabelManaged, ""),
			},
			prune: true,
			want:  []line{{"m.a", Create, nil, ""}},
		},
		{
			name:     "a spec recorded by an older meshctl, without restart, is unchanged",
			desired:  map[string]*mesh.Container{"a": {Image: "meshtest/busybox:1"}},
			observed: []engine.Container{withLabel(running(t, "a", web()), lifecycle.LabelSpec, `{"v":0,"image":"meshtest/busybox:1"}`)},
			want:     []line{{"m.a", Unchanged, nil, ""}},
		},
		{
			name:     "a spec recorded by an older meshctl, without restart, is unchanged when the file names the default",
			desired:  map[string]*mesh.Container{"a": {Image: "meshtest/busybox:1", Restart: mesh.DefaultRestart}},
			observed: []engine.Container{withLabel(running(t, "a", web()), lifecycle.LabelSpec, `{"v":0,"image":"meshtest/busybox:1"}`)},
			want:     []line{{"m.a", Unchanged, nil, ""}},
		},
		{
			name:     "a spec recorded by an older meshctl still shows a real change",
			desired:  map[string]*mesh.Container{"a": {Image: "meshtest/busybox:1", Restart: "no"}},
			observed: []engine.Container{withLabel(running(t, "a", web()), lifecycle.LabelSpec, `{"v":0,"image":"meshtest/busybox:1"}`)},
			want:     []line{{"m.a", Recreate, []string{"restart"}, ""}},
		},
		{
			name:     "a spec recorded by a newer meshctl, with a field unknown here, is unchanged",
			desired:  map[string]*mesh.Container{"a": {Image: "meshtest/busybox:1"}},
			observed: []engine.Container{withLabel(running(t, "a", web()), lifecycle.LabelSpec, `{"v":2,"image":"meshtest/busybox:1","restart":"unless-stopped","future":"x"}`)},
			want:     []line{{"m.a", Unchanged, nil, ""}},
		},
		{
			name:     "an unreadable recorded spec is recreated",
			desired:  map[string]*mesh.Container{"a": web()},
			observed: []engine.Container{withLabel(running(t, "a", web()), lifecycle.LabelSpec, `{not json`)},
			want:     []line{{"m.a", Recreate, []string{"recorded spec unreadable"}, ""}},
		},
		{
			name:    "everything at once, in name order",
			desired: map[string]*mesh.Container{"a": web(), "b": web(), "c": changed(func(c *mesh.Container) { c.Restart = "no" }), "d": web()},
			observed: []engine.Container{
				running(t, "zz", web()),
				running(t, "d", web()),
				stopped(running(t, "b", web())),
				running(t, "c", web()),
			},
			holds: map[string]HoldRef{"m.b": {Window: "w-2"}},
			want: []line{
				{"m.a", Create, nil, ""},
				{"m.b", Held, []string{"held by window w-2"}, "w-2"},
				{"m.c", Recreate, []string{"restart"}, ""},
				{"m.d", Unchanged, nil, ""},
				{"m.zz", Orphan, []string{"not in the mesh file; --prune removes it"}, ""},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := Input{Observed: tt.observed, Holds: tt.holds, Scope: scope, Prune: tt.prune, Taken: map[string]string{}}
			if tt.desired != nil {
				in.Desired = want(t, tt.desired)
			}
			for _, n := range tt.taken {
				in.Taken[n] = ""
			}
			got := lines(Plan(in))
			if !slices.EqualFunc(got, tt.want, func(a, b line) bool { return a.String() == b.String() }) {
				t.Errorf("Plan:\n got  %v\n want %v", got, tt.want)
			}
		})
	}
}

// TestPlanNeverShowsEnvValues checks that no reason, for any action, repeats
// an env value, old or new.
func TestPlanNeverShowsEnvValues(t *testing.T) {
	old := running(t, "a", web())
	for _, action := range []Action{Recreate, Deferred} {
		in := Input{
			Desired:  want(t, map[string]*mesh.Container{"a": changed(func(c *mesh.Container) { c.Env["FOO"] = secret + "-new" })}),
			Observed: []engine.Container{old},
			Scope:    scope,
		}
		if action == Deferred {
			in.Holds = map[string]HoldRef{"m.a": {Window: "w-1"}}
		}
		items := Plan(in)
		if len(items) != 1 || items[0].Action != action {
			t.Fatalf("Plan = %v, want one %s", lines(items), action)
		}
		for _, r := range items[0].Reasons {
			if strings.Contains(r, secret) || strings.Contains(r, mesh.HashValue(secret)) {
				t.Errorf("%s reason %q shows FOO's value", action, r)
			}
		}
		if !slices.Contains(items[0].Reasons, "env.FOO") {
			t.Errorf("%s reasons %q do not name env.FOO", action, items[0].Reasons)
		}
	}
	// Nor does the label the container carries.
	if l := old.Labels[lifecycle.LabelSpec]; strings.Contains(l, secret) {
		t.Errorf("spec label %s shows FOO's value", l)
	}
}

// TestPlanComparesTheSpecsEncodedAhead: the plan compares a container's
// spec label with the encoding it is given (Input.Encoded), not one of its
// own. A label equal to it is unchanged even where it would not decode;
// without it, or with one of another length, that label is unreadable.
func TestPlanComparesTheSpecsEncodedAhead(t *testing.T) {
	desired := want(t, map[string]*mesh.Container{"web": web()})
	c := running(t, "web", web())
	c.Labels[lifecycle.LabelSpec] = "not a spec"
	for _, tc := range []struct {
		name    string
		encoded []string
		action  Action
	}{
		{"encoded ahead", []string{"not a spec"}, Unchanged},
		{"none", nil, Recreate},
		{"another length", []string{"not a spec", "x"}, Recreate},
	} {
		items := Plan(Input{Desired: desired, Observed: []engine.Container{c}, Scope: scope, Encoded: tc.encoded})
		if len(items) != 1 || items[0].Action != tc.action {
			t.Errorf("%s: %+v, want one item %s", tc.name, items, tc.action)
		}
	}
	if got, want := EncodeSpecs(desired), []string{desired[0].Spec.Encode()}; !slices.Equal(got, want) {
		t.Errorf("EncodeSpecs %q, want %q", got, want)
	}
}

// TestPlanEngineSpecRoundTrip checks that what apply creates is what the
// next plan finds unchanged: the labels EngineSpec puts on a container carry
// its scope, role and recorded spec.
func TestPlanEngineSpecRoundTrip(t *testing.T) {
	ds := want(t, map[string]*mesh.Container{"a": web(), "b": {Image: "meshtest/busybox:1"}})
	var observed []engine.Container
	for _, d := range ds {
		spec := d.EngineSpec(scope)
		if spec.Restart == "" {
			t.Errorf("%s: EngineSpec leaves the restart policy to the engine; want %s", d.Name, mesh.DefaultRestart)
		}
		observed = append(observed, engine.Container{ID: "id-" + d.Name, Name: d.Name, Running: true, Labels: spec.Labels})
	}
	for _, it := range Plan(Input{Desired: ds, Observed: observed, Scope: scope}) {
		if it.Action != Unchanged {
			t.Errorf("%s: %s %q, want unchanged", it.Name, it.Action, it.Reasons)
		}
	}
	if Changes(Plan(Input{Desired: ds, Observed: observed, Scope: scope}), nil) {
		t.Error("Changes = true for a plan of unchanged containers")
	}
	if !Changes(Plan(Input{Desired: ds, Scope: scope}), nil) {
		t.Error("Changes = false for a plan of creates")
	}
}

// TestPlanChanges checks which actions count as changing the engine, of a
// container and of a network alike (one rule: changesEngine).
func TestPlanChanges(t *testing.T) {
	for action, want := range map[Action]bool{
		Create: true, Recreate: true, Remove: true,
		Unchanged: false, Held: false, Deferred: false, Orphan: false, Conflict: false, Kept: false, Failed: false,
	} {
		if got := Changes([]Item{{Action: Unchanged}, {Action: action}}, nil); got != want {
			t.Errorf("Changes(%s) = %v, want %v", action, got, want)
		}
		if got := Changes(nil, []NetItem{{Action: Unchanged}, {Action: action}}); got != want {
			t.Errorf("Changes(network %s) = %v, want %v", action, got, want)
		}
	}
}
