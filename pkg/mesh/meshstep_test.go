package mesh

import (
	"strings"
	"testing"
	"time"
)

// meshStep is base with one step gc, its extra lines given.
func meshStep(lines string) string {
	return src(base) + "    steps:\n      gc:\n        while-changed: {registry: {env: {RO: \"1\"}}}\n        exec: [/bin/gc]\n" + lines
}

// TestDecodeMeshStep: mesh is host or all, and gather only goes with all.
// An unset gather is DefaultGather; MeshSteps names the mesh: all steps.
func TestDecodeMeshStep(t *testing.T) {
	for _, tt := range []struct {
		name, lines string
		all         bool
		gather      time.Duration
		text        string
	}{
		{name: "unset", lines: "", gather: DefaultGather, text: "mesh: host"},
		{name: "host", lines: "        mesh: host\n", gather: DefaultGather, text: "mesh: host"},
		{name: "all", lines: "        mesh: all\n", all: true, gather: DefaultGather, text: "mesh: all, gather 5m0s"},
		{name: "all, gather 10m", lines: "        mesh: all\n        gather: 10m\n", all: true, gather: 10 * time.Minute, text: "mesh: all, gather 10m0s"},
		{name: "all, gather 1s", lines: "        mesh: all\n        gather: 1s\n", all: true, gather: time.Second, text: "mesh: all, gather 1s"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode("mesh.yaml", []byte(meshStep(tt.lines)))
			if err != nil {
				t.Fatal(err)
			}
			m := f.Modules["store"]
			st := m.Steps["gc"]
			if st.MeshAll() != tt.all {
				t.Errorf("MeshAll() = %v, want %v", st.MeshAll(), tt.all)
			}
			if got := st.GatherOrDefault(); got != tt.gather {
				t.Errorf("GatherOrDefault() = %v, want %v", got, tt.gather)
			}
			if got := st.MeshText(); got != tt.text {
				t.Errorf("MeshText() = %q, want %q", got, tt.text)
			}
			want := ""
			if tt.all {
				want = "gc"
			}
			if got := strings.Join(m.MeshSteps(), ","); got != want {
				t.Errorf("MeshSteps() = %q, want %q", got, want)
			}
		})
	}
}

// TestDecodeMeshStepRefusals: a bad mesh or gather names its field and
// line. Each refusal is the only error, so nothing else hides it.
func TestDecodeMeshStepRefusals(t *testing.T) {
	for _, tt := range []struct{ name, lines, field, msg string }{
		{name: "unknown mesh", lines: "        mesh: everywhere # <-\n", field: "mesh",
			msg: `unknown value "everywhere": give host (this host only, the default) or all (every host that runs the module)`},
		{name: "gather without mesh", lines: "        gather: 10m # <-\n", field: "gather",
			msg: "is only for a step with mesh: all"},
		{name: "gather with mesh: host", lines: "        mesh: host\n        gather: 10m # <-\n", field: "gather",
			msg: "is only for a step with mesh: all"},
		{name: "gather below 1s", lines: "        mesh: all\n        gather: 500ms # <-\n", field: "gather",
			msg: "500ms is too short: give at least 1s (etcd counts the deadline in whole seconds)"},
		{name: "gather zero", lines: "        mesh: all\n        gather: 0s # <-\n", field: "gather",
			msg: `duration "0s" must be positive`},
		{name: "gather negative", lines: "        mesh: all\n        gather: -1m # <-\n", field: "gather",
			msg: `duration "-1m" must be positive`},
		{name: "mesh a list", lines: "        mesh: [all] # <-\n        gather: 10m\n", field: "mesh",
			msg: "not a list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := meshStep(tt.lines)
			_, err := Decode("mesh.yaml", []byte(s))
			checkRefusal(t, err, "mesh.yaml", markedLine(t, s), "modules.store.steps.gc."+tt.field, tt.msg)
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("more than one error:\n%v", err)
			}
		})
	}
}

// TestDecodeMeshStepErrorsTogether: the mesh and gather errors of several
// steps come in one pass, with the file's other errors, in line order.
func TestDecodeMeshStepErrorsTogether(t *testing.T) {
	s := src(base) + `        restart: sometimes
    steps:
      a:
        exec: [/bin/a]
        mesh: both
      b:
        exec: [/bin/b]
        gather: 5m
      c:
        exec: [/bin/c]
        mesh: all
        gather: 10ms
`
	_, err := Decode("mesh.yaml", []byte(s))
	if err == nil {
		t.Fatal("no error")
	}
	want := []string{
		`mesh.yaml:6: modules.store.containers.registry.restart: "sometimes" is not one of`,
		`mesh.yaml:10: modules.store.steps.a.mesh: unknown value "both"`,
		`mesh.yaml:13: modules.store.steps.b.gather: is only for a step with mesh: all`,
		`mesh.yaml:17: modules.store.steps.c.gather: 10ms is too short: give at least 1s`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want it to start %q", i, lines[i], w)
		}
	}
}
