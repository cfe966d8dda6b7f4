package mesh

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// marker ends the line a refusal must blame, in the YAML sources below.
const marker = "# <-"

// src drops the newline that lets a raw string start on its own line.
func src(s string) string { return strings.TrimPrefix(s, "\n") }

// markedLine returns the 1-based line of src that holds the marker.
func markedLine(t *testing.T, src string) int {
	t.Helper()
	line := 0
	for i, l := range strings.Split(src, "\n") {
		if strings.Contains(l, marker) {
			if line != 0 {
				t.Fatalf("source marks lines %d and %d", line, i+1)
			}
			line = i + 1
		}
	}
	if line == 0 {
		t.Fatalf("source marks no line:\n%s", src)
	}
	return line
}

// contractFile is the CONTRACT §4 example, as it must decode.
func contractFile() *File {
	return &File{Modules: map[string]*Module{
		"store": {
			Containers: map[string]*Container{
				"registry": {
					Image:      "meshtest/registry:1",
					Entrypoint: []string{"/bin/registry"},
					Command:    []string{"serve", "/etc/docker/registry/config.yml"},
					Env:        map[string]string{"REGISTRY_HTTP_ADDR": "127.0.0.1:5000"},
					Volumes:    []string{"store-data:/var/lib/registry", "/srv/conf:/etc/conf:ro"},
					Network:    "host",
					Ports:      []string{"127.0.0.1:5000:5000"},
					Restart:    "unless-stopped",
					Labels:     map[string]string{"team": "infra"},
				},
			},
			Steps: map[string]*Step{
				"garbage-collect": {
					WhileStopped: []string{"registry"},
					Timeout:      Duration(30 * time.Minute),
					Run: &RunStep{
						Command: []string{"garbage-collect", "/etc/docker/registry/config.yml"},
					},
				},
			},
		},
	}}
}

func TestDecodeValid(t *testing.T) {
	for _, file := range []string{"contract.yaml", "contract.json", "contract-tabs.json"} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Decode(file, data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if want := contractFile(); !reflect.DeepEqual(got, want) {
				t.Errorf("Decode =\n%s\nwant\n%s", dump(got), dump(want))
			}
		})
	}
}

func TestDecodeTabIndentedJSONHasTabs(t *testing.T) {
	// Guard the fixture: the test above only means something if the file
	// really is indented with tabs, which YAML forbids outside flow context.
	data, err := os.ReadFile("testdata/contract-tabs.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "\n\t\t\t\t\t\"image\"") {
		t.Fatal("testdata/contract-tabs.json is not indented with tabs")
	}
}

func dump(f *File) string {
	var b strings.Builder
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		for _, cn := range m.ContainerNames() {
			fmt.Fprintf(&b, "%s.%s %+v\n", mn, cn, *m.Containers[cn])
		}
		for _, sn := range sortedKeys(m.Steps) {
			s := m.Steps[sn]
			fmt.Fprintf(&b, "%s/%s %+v run=%+v\n", mn, sn, *s, s.Run)
		}
	}
	return b.String()
}

// TestDecodeValidNamesAtTheLimit accepts 63-character names and names that
// start with a digit, for modules, containers, steps and artifacts.
func TestDecodeValidNamesAtTheLimit(t *testing.T) {
	n63 := strings.Repeat("a", 62) + "9"
	f, err := Decode("mesh.yaml", []byte(src(fmt.Sprintf(`
modules:
  %[1]s:
    containers:
      %[1]s: {image: x}
      0-db: {artifact: %[1]s}
    steps:
      %[1]s: {while-stopped: [%[1]s, 0-db], exec: [/bin/true]}
`, n63))))
	if err != nil {
		t.Fatalf("63-character names, names starting with a digit: %v", err)
	}
	if got := f.Modules[n63].ContainerNames(); !reflect.DeepEqual(got, []string{"0-db", n63}) {
		t.Errorf("ContainerNames = %q", got)
	}
}

// TestDecodeValidImages accepts every form of reference the engine takes,
// in a container and in a run step, and keys that are odd but valid.
func TestDecodeValidImages(t *testing.T) {
	for _, image := range []string{
		"meshtest/busybox:1",
		"busybox",
		"127.0.0.1:5000/x/y:2",
		"localhost/x",
		"reg.example/store@sha256:" + strings.Repeat("2", 64),
		"reg.example:443/team/store:v1.2@sha256:" + strings.Repeat("a", 64),
		"sha256:" + strings.Repeat("b", 64), // an image id
	} {
		t.Run(image, func(t *testing.T) {
			_, err := Decode("mesh.yaml", []byte(src(fmt.Sprintf(`
modules:
  store:
    containers:
      registry:
        image: %[1]q
        env: {a.b-c: x, _X1: "", "ÄÖ": y}
        labels: {com.example.team: infra, io.meshctl: x, meshctl.io/x: y}
    steps:
      gc:
        while-stopped: [registry]
        run: {image: %[1]q}
`, image))))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
		})
	}
}

// base is a valid file; refusals below change one thing in it.
const base = `
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1
`

// refusal is a mesh file Decode refuses, and how it names the error.
type refusal struct {
	name  string
	src   string // YAML sources mark the blamed line; see line
	line  int    // the blamed line when src has no marker (JSON; 0: none)
	field string
	msg   string
}

func refusals() []refusal {
	name64 := strings.Repeat("a", 64)
	return []refusal{
		// Unknown fields: KnownFields.
		{name: "unknown field in a container", src: base + `
        bogus: 1 # <-
`, field: "modules.store.containers.registry.bogus", msg: `unknown field "bogus"`},
		{name: "unknown field in a step", src: base + `
    steps:
      gc:
        exec: [/bin/gc]
        retries: 3 # <-
`, field: "modules.store.steps.gc.retries", msg: `unknown field "retries" (fields here: while-stopped, while-changed, timeout, stall-after, run, exec, mesh, gather)`},
		{name: "unknown field in a run step", src: base + `
    steps:
      gc:
        while-stopped: [registry]
        run:
          command: [gc]
          privileged: true # <-
`, field: "modules.store.steps.gc.run.privileged", msg: `unknown field "privileged"`},
		{name: "unknown field in a module", src: base + `
    network: host # <-
`, field: "modules.store.network", msg: `unknown field "network"`},
		{name: "unknown field at the top", src: base + `
version: 2 # <-
`, field: "version", msg: `unknown field "version"`},
		{name: "misspelt field", src: base + `
        restarts: always # <-
`, field: "modules.store.containers.registry.restarts", msg: `unknown field "restarts"; did you mean "restart"?`},
		{name: "unknown field with a space", src: base + `
        "bad key": 1 # <-
`, field: "modules.store.containers.registry.bad key", msg: `unknown field "bad key"`},
		{name: "unknown field in one-line JSON, not last",
			src:  `{"modules": {"store": {"containers": {"registry": {"bogus": 1, "image": "x"}}}}}`,
			line: 1, field: "modules.store.containers.registry.bogus", msg: `unknown field "bogus"`},
		{name: "unknown field in indented JSON", src: "{\n\t\"modules\": {\n\t\t\"store\": {\n\t\t\t\"containers\": {\n\t\t\t\t\"registry\": {\n\t\t\t\t\t\"image\": \"x\",\n\t\t\t\t\t\"bogus\": 1\n\t\t\t\t}\n\t\t\t}\n\t\t}\n\t}\n}\n",
			line: 7, field: "modules.store.containers.registry.bogus", msg: `unknown field "bogus"`},

		// Wrong types.
		{name: "string for a list", src: base + `
        command: serve # <-
`, field: "modules.store.containers.registry.command", msg: `want a list of strings, like [sh, -c, "…"], not a string (serve)`},
		{name: "list for a map", src: base + `
        labels: [a=1] # <-
`, field: "modules.store.containers.registry.labels", msg: "want a map of strings, like {team: infra}, not a list"},
		{name: "block list for a map", src: base + `
        labels:
          - a=1 # <-
`, field: "modules.store.containers.registry.labels", msg: "want a map of strings, like {team: infra}, not a list"},
		{name: "env list item without a value", src: base + `
        env: [A=1, HOME] # <-
`, field: "modules.store.containers.registry.env[1]", msg: `env item 1: want KEY=value, not a KEY alone`},
		{name: "env list item twice", src: base + `
        env:
          - A=1
          - A=2 # <-
`, field: "modules.store.containers.registry.env[1]", msg: `env item 1: "A" is set twice (first on line 8)`},
		{name: "env list item a map", src: base + `
        env:
          - {A: 1} # <-
`, field: "modules.store.containers.registry.env[0]", msg: "env item 0: want KEY=value"},
		{name: "env a string", src: base + `
        env: A=1 # <-
`, field: "modules.store.containers.registry.env", msg: `want a map like {KEY: value} or a list like ["KEY=value"], not a string`},
		{name: "env value with a NUL", src: base + `
        env: {A: 1, PW: "S3CRET\0"} # <-
`, field: "modules.store.containers.registry.env.PW", msg: "the value holds a control character (NUL)"},
		{name: "env list value with an escape", src: base + `
        env:
          - A=1
          - "PW=S3CRET\e[0m" # <-
`, field: "modules.store.containers.registry.env.PW", msg: "the value holds a control character (U+001B)"},
		{name: "run step env value with a DEL", src: base + `
    steps:
      gc:
        run:
          image: x
          env: {PW: "S3CRET\x7f"} # <-
`, field: "modules.store.steps.gc.run.env.PW", msg: "the value holds a control character (U+007F)"},
		{name: "binary image", src: base + `
      web: {image: !!binary bWVzaHRlc3Q=} # <-
`, field: "modules.store.containers.web.image", msg: "the tag !!binary is not taken"},
		{name: "local tag", src: base + `
        network: !net host # <-
`, field: "modules.store.containers.registry.network", msg: "the tag !net is not taken"},
		{name: "negative timeout in flow style", src: base + `
    steps:
      gc: {while-stopped: [registry], timeout: -5m, run: {command: [gc]}} # <-
`, field: "modules.store.steps.gc.timeout", msg: `duration "-5m" must be positive`},
		{name: "list for a grace period in flow style", src: base + `
      web: {image: x, stop-grace-period: [10s], command: [serve]} # <-
`, field: "modules.store.containers.web.stop-grace-period", msg: "want a duration, like 30m or 2h, not a list"},
		{name: "map for a string", src: base + `
        network: {name: host} # <-
`, field: "modules.store.containers.registry.network", msg: "want a string, not a map"},
		{name: "list of containers", src: `
modules:
  store:
    containers:
      - registry # <-
`, field: "modules.store.containers", msg: "want a map of containers by name, like {registry: {image: …}}, not a list"},
		{name: "value naming the package", src: base + `
        ports: mesh.example # <-
`, field: "modules.store.containers.registry.ports", msg: `want a list of strings, like ["127.0.0.1:5000:5000"], not a string (mesh.ex...)`},
		{name: "not a map", src: `
just a string # <-
`, msg: `want a map with a "modules:" key, not a string (just a ...)`},
		// Duplicate keys.
		{name: "duplicate module", src: base + `
  store: # <-
    containers:
      cache: {image: x}
`, field: "modules.store", msg: `mapping key "store" already defined at line 2`},
		{name: "duplicate env key", src: base + `
        env:
          A: "1"
          A: "2" # <-
`, field: "modules.store.containers.registry.env.A", msg: `mapping key "A" already defined at line 8`},
		{name: "duplicate key in one-line JSON",
			src:  `{"modules": {"store": {"containers": {"registry": {"env": {"A": "1", "B": "2", "A": "3"}, "image": "x"}}}}}`,
			line: 1, field: "modules.store.containers.registry.env.A", msg: `mapping key "A" already defined at line 1`},

		// Names.
		{name: "module name upper case", src: `
modules:
  Store: # <-
    containers:
      registry: {image: x}
`, field: "modules.Store", msg: `module name "Store" is invalid`},
		{name: "module name leading dash", src: `
modules:
  "-store": # <-
    containers:
      registry: {image: x}
`, field: "modules.-store", msg: `module name "-store" is invalid`},
		{name: "module name 64 characters", src: `
modules:
  ` + name64 + `: # <-
    containers:
      registry: {image: x}
`, field: "modules." + name64, msg: "is invalid"},
		{name: "container name upper case", src: `
modules:
  store:
    containers:
      Registry: {image: x} # <-
`, field: "modules.store.containers.Registry", msg: `container name "Registry" is invalid`},
		{name: "container name leading dash", src: `
modules:
  store:
    containers:
      "-registry": {image: x} # <-
`, field: "modules.store.containers.-registry", msg: `container name "-registry" is invalid`},
		{name: "container name 64 characters", src: `
modules:
  store:
    containers:
      ` + name64 + `: {image: x} # <-
`, field: "modules.store.containers." + name64, msg: "is invalid"},
		{name: "container name with a dot", src: `
modules:
  store:
    containers:
      reg.istry: {image: x} # <-
`, field: "modules.store.containers.reg.istry", msg: `container name "reg.istry" is invalid`},
		{name: "step name upper case", src: base + `
    steps:
      GC: {exec: [/bin/gc]} # <-
`, field: "modules.store.steps.GC", msg: `step name "GC" is invalid`},
		{name: "step name leading dash", src: base + `
    steps:
      "-gc": {exec: [/bin/gc]} # <-
`, field: "modules.store.steps.-gc", msg: `step name "-gc" is invalid`},
		{name: "step name 64 characters", src: base + `
    steps:
      ` + name64 + `: {exec: [/bin/gc]} # <-
`, field: "modules.store.steps." + name64, msg: "is invalid"},

		// Steps.
		{name: "unknown container in while-stopped", src: base + `
    steps:
      gc:
        while-stopped: [registry, cache] # <-
        exec: [/bin/gc]
`, field: "modules.store.steps.gc.while-stopped[1]", msg: `unknown container "cache" (this module has: registry)`},
		{name: "unknown container in block while-stopped", src: base + `
    steps:
      gc:
        while-stopped:
          - registry
          - cache # <-
        exec: [/bin/gc]
`, field: "modules.store.steps.gc.while-stopped[1]", msg: `unknown container "cache"`},
		{name: "container of another module in while-stopped", src: base + `
  web:
    containers:
      front: {image: x}
    steps:
      gc:
        while-stopped: [registry] # <-
        exec: [/bin/gc]
`, field: "modules.web.steps.gc.while-stopped[0]", msg: `unknown container "registry" (this module has: front)`},
		{name: "container twice in while-stopped", src: base + `
    steps:
      gc:
        while-stopped: [registry, registry] # <-
        exec: [/bin/gc]
`, field: "modules.store.steps.gc.while-stopped[1]", msg: `container "registry" listed twice`},
		{name: "step with run and exec", src: base + `
    steps:
      gc:
        while-stopped: [registry]
        run: {command: [gc]}
        exec: [/bin/gc] # <-
`, field: "modules.store.steps.gc.exec", msg: "give either run or exec, not both"},
		{name: "step with neither run nor exec", src: base + `
    steps:
      gc: # <-
        while-stopped: [registry]
        timeout: 5m
`, field: "modules.store.steps.gc", msg: "has neither run nor exec"},
		{name: "empty step", src: base + `
    steps:
      gc: # <-
`, field: "modules.store.steps.gc", msg: "is empty"},
		{name: "run step without image that holds nothing", src: base + `
    steps:
      gc:
        run: {command: [gc]} # <-
`, field: "modules.store.steps.gc.run.image", msg: "is needed when the step holds no container"},
		{name: "unknown container in volumes-from", src: base + `
    steps:
      gc:
        run: {image: x, volumes-from: [cache]} # <-
`, field: "modules.store.steps.gc.run.volumes-from[0]", msg: `unknown container "cache"`},
		{name: "bad duration", src: base + `
    steps:
      gc:
        timeout: soon # <-
        exec: [/bin/gc]
`, field: "modules.store.steps.gc.timeout", msg: `invalid duration "soon"`},

		// Containers.
		{name: "image and artifact", src: `
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1
        artifact: store # <-
`, field: "modules.store.containers.registry.artifact", msg: "give either image or artifact, not both"},
		{name: "neither image nor artifact", src: `
modules:
  store:
    containers:
      registry: # <-
        command: [serve]
`, field: "modules.store.containers.registry", msg: "has neither image nor artifact"},
		{name: "empty image", src: `
modules:
  store:
    containers:
      registry: # <-
        image: ""
`, field: "modules.store.containers.registry", msg: "has neither image nor artifact"},
		{name: "empty container", src: `
modules:
  store:
    containers:
      registry: # <-
`, field: "modules.store.containers.registry", msg: "is empty"},
		{name: "empty module", src: `
modules:
  store: # <-
`, field: "modules.store", msg: "is empty"},
		{name: "no modules", src: `
modules: # <-
`, field: "modules", msg: "missing"},
		{name: "bad restart", src: base + `
        restart: sometimes # <-
`, field: "modules.store.containers.registry.restart", msg: `"sometimes" is not one of no, always, unless-stopped, on-failure`},
		{name: "bad pull", src: base + `
        pull: daily # <-
`, field: "modules.store.containers.registry.pull", msg: `"daily" is not one of missing, always, never`},
		{name: "volume without target", src: base + `
        volumes: ["data:/var/data", data] # <-
`, field: "modules.store.containers.registry.volumes[1]", msg: `volume "data"`},
		{name: "volume with relative target", src: base + `
        volumes:
          - data:var/data # <-
`, field: "modules.store.containers.registry.volumes[0]", msg: `volume "data:var/data"`},
		{name: "volume with bad mode", src: base + `
        volumes:
          - data:/var/data:ro
          - /srv:/srv:rx # <-
`, field: "modules.store.containers.registry.volumes[1]", msg: `mode "rx" is not ro or rw`},
		{name: "port out of range", src: base + `
        ports: ["127.0.0.1:5000:5000", "70000:80"] # <-
`, field: "modules.store.containers.registry.ports[1]", msg: `"70000" is not a port number`},
		{name: "port not a number", src: base + `
        ports:
          - http # <-
`, field: "modules.store.containers.registry.ports[0]", msg: `"http" is not a port number`},
		{name: "port with bad protocol", src: base + `
        ports: ["80/icmp"] # <-
`, field: "modules.store.containers.registry.ports[0]", msg: `protocol "icmp"`},
		{name: "reserved label prefix", src: base + `
        labels:
          team: infra
          io.meshctl.spec: "{}" # <-
`, field: "modules.store.containers.registry.labels.io.meshctl.spec", msg: `label prefix "io.meshctl." is reserved`},
		{name: "bad env name", src: base + `
        env:
          A: x
          "A=B": x # <-
`, field: "modules.store.containers.registry.env.A=B", msg: `"A=B" is not a variable name`},
		{name: "empty env name", src: base + `
        env:
          "": x # <-
`, field: "modules.store.containers.registry.env.", msg: `"" is not a variable name`},
		{name: "env name with a NUL", src: base + `
        env: {"A\0B": x} # <-
`, field: "modules.store.containers.registry.env.A\x00B", msg: `"A\x00B" is not a variable name`},
		{name: "env name with a tab", src: base + `
        env:
          "A\tB": x # <-
`, field: "modules.store.containers.registry.env.A\tB", msg: `"A\tB" is not a variable name`},
		{name: "env name with a carriage return", src: base + `
        env:
          "A\r": x # <-
`, field: "modules.store.containers.registry.env.A\r", msg: `"A\r" is not a variable name`},
		{name: "bad env name in a run step", src: base + `
    steps:
      gc:
        while-stopped: [registry]
        run:
          command: [gc]
          env:
            "GC MODE": x # <-
`, field: "modules.store.steps.gc.run.env.GC MODE", msg: `"GC MODE" is not a variable name`},
		{name: "empty label key", src: base + `
        labels:
          "": infra # <-
`, field: "modules.store.containers.registry.labels.", msg: `"" is not a label key`},
		{name: "label key with a space", src: base + `
        labels:
          "my team": infra # <-
`, field: "modules.store.containers.registry.labels.my team", msg: `"my team" is not a label key`},
		{name: "label key with '='", src: base + `
        labels:
          team=infra: x # <-
`, field: "modules.store.containers.registry.labels.team=infra", msg: `"team=infra" is not a label key`},
		{name: "label key with a newline", src: base + `
        labels: {"a\nb": x} # <-
`, field: "modules.store.containers.registry.labels.a\nb", msg: `"a\nb" is not a label key`},

		// Image references: refused at decode, not by the engine mid-apply.
		{name: "image upper case", src: `
modules:
  store:
    containers:
      registry:
        image: meshtest/Registry:1 # <-
`, field: "modules.store.containers.registry.image", msg: `"meshtest/Registry:1" is not an image reference: invalid reference format: repository name (meshtest/Registry) must be lowercase`},
		{name: "image with a space", src: `
modules:
  store:
    containers:
      registry:
        image: "meshtest/registry: 1" # <-
`, field: "modules.store.containers.registry.image", msg: `"meshtest/registry: 1" is not an image reference: invalid reference format`},
		{name: "image with two tags", src: `
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1:2 # <-
`, field: "modules.store.containers.registry.image", msg: `is not an image reference`},
		{name: "image with a bad digest", src: `
modules:
  store:
    containers:
      registry:
        image: meshtest/registry@sha256:123 # <-
`, field: "modules.store.containers.registry.image", msg: `is not an image reference`},
		{name: "image in one-line JSON",
			src:  `{"modules": {"store": {"containers": {"registry": {"image": "-x-"}}}}}`,
			line: 1, field: "modules.store.containers.registry.image", msg: `"-x-" is not an image reference`},
		{name: "bad image in a run step", src: base + `
    steps:
      gc:
        while-stopped: [registry]
        run:
          image: "registry gc" # <-
          command: [gc]
`, field: "modules.store.steps.gc.run.image", msg: `"registry gc" is not an image reference`},
		{name: "artifact not a module name", src: `
modules:
  store:
    containers:
      registry:
        artifact: Store # <-
`, field: "modules.store.containers.registry.artifact", msg: `"Store" is not a module name`},

		// Whole file.
		{name: "empty file", src: "", msg: "is empty"},
		{name: "only comments", src: "# nothing yet\n\n", msg: "is empty"},
		{name: "null document", src: "~\n", msg: "is empty"},
		{name: "two YAML documents", src: base + `
--- # <-
modules: {}
`, msg: "holds more than one YAML document"},
		{name: "two YAML documents, the second empty", src: base + `
--- # <-
`, msg: "holds more than one YAML document"},
	}
}

func TestDecodeRefusals(t *testing.T) {
	for _, tt := range refusals() {
		t.Run(tt.name, func(t *testing.T) {
			s := src(tt.src)
			line := tt.line
			if strings.Contains(s, marker) {
				line = markedLine(t, s)
			}
			_, err := Decode("mesh.yaml", []byte(s))
			checkRefusal(t, err, "mesh.yaml", line, tt.field, tt.msg)
		})
	}
}

// checkRefusal asserts that err is a *DecodeError that names file, line and
// field, in its fields and in its message, and whose message holds msg.
func checkRefusal(t *testing.T, err error, file string, line int, field, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s:%d: %s: …%s…", file, line, field, msg)
	}
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error is %T, want *DecodeError: %v", err, err)
	}
	if de.File != file || de.Line != line || de.Field != field {
		t.Errorf("error at %q line %d field %q, want %q line %d field %q (%v)", de.File, de.Line, de.Field, file, line, field, err)
	}
	prefix := file
	if line > 0 {
		prefix += fmt.Sprintf(":%d", line)
	}
	prefix += ": "
	if field != "" {
		prefix += field + ": "
	}
	if got := err.Error(); !strings.HasPrefix(got, prefix) || !strings.Contains(got[len(prefix):], msg) {
		t.Errorf("Error() = %q\nwant      %q + …%q…", got, prefix, msg)
	}
	if de.Fault() != fault.BadInput {
		t.Errorf("Fault() = %q, want %q", de.Fault(), fault.BadInput)
	}
}

// TestDecodeRefusalIsStable decodes files with two errors of a kind, in map
// fields, many times: the error named is the same every time.
func TestDecodeRefusalIsStable(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{src(base) + "        labels: {io.meshctl.b: x, io.meshctl.a: x, io.meshctl.c: x}\n",
			"mesh.yaml:6: modules.store.containers.registry.labels.io.meshctl.a: "},
		{src(base) + "        env: {\"B=\": x, \"A B\": x, \"C=\": x}\n",
			"mesh.yaml:6: modules.store.containers.registry.env.A B: "},
		{src(base) + "      Cache: {image: x}\n      Bar: {image: x}\n      Web: {image: x}\n",
			"mesh.yaml:6: modules.store.containers.Cache: "},
	} {
		for range 30 {
			_, err := Decode("mesh.yaml", []byte(tt.src))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("Decode = %v, want %s…", err, tt.want)
			}
		}
	}
}

// TestDecodeAliasBomb is a small file whose aliases expand to a million
// containers: it is refused before it is decoded (MaxRepeated).
func TestDecodeAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("modules:\n  m0:\n    containers: &c\n      c0: &x {image: x, command: [a, b], env: {A: b}}\n")
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&b, "      c%d: *x\n", i)
	}
	for i := 1; i < 1000; i++ {
		fmt.Fprintf(&b, "  m%d: {containers: *c}\n", i)
	}
	_, err := Decode("mesh.yaml", []byte(b.String()))
	checkRefusal(t, err, "mesh.yaml", 0, "", "its aliases repeat more than 65536 values in all: write the values out, or apply its modules from several files")
}

func TestDecodeDuration(t *testing.T) {
	step := func(timeout string) string {
		return src(base) + "    steps:\n      gc:\n        exec: [/bin/gc]\n" + timeout
	}
	for _, tt := range []struct {
		timeout string
		want    time.Duration
		msg     string // refused when set
	}{
		{timeout: "30m", want: 30 * time.Minute},
		{timeout: "90s", want: 90 * time.Second},
		{timeout: "1h30m", want: 90 * time.Minute},
		{timeout: `"2h"`, want: 2 * time.Hour},
		{timeout: "0s", msg: `duration "0s" must be positive`},
		{timeout: "0", msg: `duration "0" must be positive`},
		{timeout: "-1m", msg: `duration "-1m" must be positive`},
		{timeout: "soon", msg: `invalid duration "soon"`},
		{timeout: "30", msg: `invalid duration "30"`},
		{timeout: "[30m]", msg: "want a duration, like 30m or 2h, not a list"},
	} {
		t.Run(tt.timeout, func(t *testing.T) {
			s := step("        timeout: " + tt.timeout + "\n")
			f, err := Decode("mesh.yaml", []byte(s))
			if tt.msg != "" {
				checkRefusal(t, err, "mesh.yaml", strings.Count(s, "\n"), "modules.store.steps.gc.timeout", tt.msg)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st := f.Modules["store"].Steps["gc"]
			if st.Timeout.Std() != tt.want || st.TimeoutOrDefault() != tt.want {
				t.Errorf("timeout %v, TimeoutOrDefault %v; want %v", st.Timeout.Std(), st.TimeoutOrDefault(), tt.want)
			}
		})
	}
	t.Run("unset", func(t *testing.T) {
		f, err := Decode("mesh.yaml", []byte(step("")))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Modules["store"].Steps["gc"].TimeoutOrDefault(); got != time.Hour {
			t.Errorf("TimeoutOrDefault() = %v, want 1h", got)
		}
	})
	t.Run("null", func(t *testing.T) {
		f, err := Decode("mesh.yaml", []byte(step("        timeout: ~\n")))
		if err != nil {
			t.Fatal(err)
		}
		if got := f.Modules["store"].Steps["gc"].TimeoutOrDefault(); got != time.Hour {
			t.Errorf("TimeoutOrDefault() = %v, want 1h", got)
		}
	})
}

func TestDurationText(t *testing.T) {
	var d Duration
	if err := d.UnmarshalText([]byte("30m")); err != nil || d.Std() != 30*time.Minute {
		t.Fatalf("UnmarshalText(30m) = %v, %v", d.Std(), err)
	}
	if b, _ := d.MarshalText(); string(b) != "30m0s" {
		t.Errorf("MarshalText = %q, want 30m0s", b)
	}
	for _, s := range []string{"0s", "-1m", "soon", ""} {
		if err := new(Duration).UnmarshalText([]byte(s)); err == nil {
			t.Errorf("UnmarshalText(%q) accepted", s)
		}
	}
}

func TestDefaults(t *testing.T) {
	if got := (&Container{}).PullPolicy(); got != "missing" {
		t.Errorf("PullPolicy() = %q, want missing", got)
	}
	if got := (&Container{Pull: "never"}).PullPolicy(); got != "never" {
		t.Errorf("PullPolicy() = %q, want never", got)
	}
	if got := EngineName("store", "registry"); got != "store.registry" {
		t.Errorf("EngineName = %q", got)
	}
}

func TestLoad(t *testing.T) {
	want := contractFile()
	t.Run("file", func(t *testing.T) {
		got, err := Load("testdata/contract.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Load =\n%s", dump(got))
		}
	})
	t.Run("stdin", func(t *testing.T) {
		f, err := os.Open("testdata/contract.json")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got, err := Load("-", f)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Load(-) =\n%s", dump(got))
		}
	})
	t.Run("stdin refused", func(t *testing.T) {
		s := src(base) + "        restart: sometimes\n"
		_, err := Load("-", strings.NewReader(s))
		checkRefusal(t, err, "<stdin>", 6, "modules.store.containers.registry.restart", `"sometimes"`)
	})
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.yaml")
		_, err := Load(path, nil)
		checkRefusal(t, err, path, 0, "", "cannot open")
	})
}

// padded returns a valid mesh file of exactly size bytes.
func padded(t testing.TB, size int) []byte {
	head := src(base)
	if size < len(head)+2 {
		t.Fatalf("size %d too small", size)
	}
	b := make([]byte, 0, size)
	b = append(b, head...)
	b = append(b, '#')
	b = append(b, strings.Repeat("x", size-len(head)-2)...)
	b = append(b, '\n')
	return b
}

func TestLoadSizeLimit(t *testing.T) {
	dir := t.TempDir()
	at, over := filepath.Join(dir, "at.yaml"), filepath.Join(dir, "over.yaml")
	if err := os.WriteFile(at, padded(t, MaxFileSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(over, padded(t, MaxFileSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if MaxFileSize != 2<<20 {
		t.Fatalf("MaxFileSize = %d, want 2 MiB", MaxFileSize)
	}
	t.Run("file of 2 MiB", func(t *testing.T) {
		if _, err := Load(at, nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("file over 2 MiB", func(t *testing.T) {
		_, err := Load(over, nil)
		checkRefusal(t, err, over, 0, "", "is larger than 2 MiB")
	})
	t.Run("stdin of 2 MiB", func(t *testing.T) {
		if _, err := Load("-", strings.NewReader(string(padded(t, MaxFileSize)))); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("stdin over 2 MiB", func(t *testing.T) {
		_, err := Load("-", strings.NewReader(string(padded(t, MaxFileSize+1))))
		checkRefusal(t, err, "<stdin>", 0, "", "is larger than 2 MiB")
	})
	t.Run("stdin of 64 MiB", func(t *testing.T) {
		// Load stops reading past the limit rather than holding it all.
		r := &countingReader{r: io.LimitReader(endless{}, 64<<20)}
		_, err := Load("-", r)
		checkRefusal(t, err, "<stdin>", 0, "", "is larger than 2 MiB")
		if r.n > MaxFileSize+1 {
			t.Errorf("Load read %d bytes of stdin, want at most %d", r.n, MaxFileSize+1)
		}
	})
	t.Run("decode over 2 MiB", func(t *testing.T) {
		_, err := Decode("big.yaml", padded(t, MaxFileSize+1))
		checkRefusal(t, err, "big.yaml", 0, "", "is larger than 2 MiB")
	})
}

type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// endless is a reader that never ends: a comment line of x's.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	if len(p) > 0 {
		p[0] = '#'
	}
	return len(p), nil
}

// TestDecodeReportsEveryError: a file's errors come all at once, each with
// its line and field, up to MaxErrors: validation errors, and yaml's type
// errors and unknown fields.
func TestDecodeReportsEveryError(t *testing.T) {
	_, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1
        restart: sometimes
        pull: often
      Web: {image: x}
`)))
	var de *DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("Decode = %v, want a *DecodeError", err)
	}
	want := "mesh.yaml:6: modules.store.containers.registry.restart: \"sometimes\" is not one of no, always, unless-stopped, on-failure\n" +
		"mesh.yaml:7: modules.store.containers.registry.pull: \"often\" is not one of missing, always, never\n" +
		"mesh.yaml:8: modules.store.containers.Web: container name \"Web\" is invalid"
	if n := strings.Count(err.Error(), "\n"); n != 2 {
		t.Fatalf("Error() = %q, want three lines", err)
	}
	for _, line := range strings.Split(want, "\n") {
		if !strings.Contains(err.Error(), line) {
			t.Errorf("Error() = %q\nlacks %q", err, line)
		}
	}

	// yaml's own errors: two unknown fields and a type error, all named.
	_, err = Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry:
        image: meshtest/registry:1
        imgae: x
        command: serve
        netwrok: host
`)))
	for _, line := range []string{
		`mesh.yaml:6: modules.store.containers.registry.imgae: unknown field "imgae"; did you mean "image"?`,
		`mesh.yaml:7: modules.store.containers.registry.command: want a list of strings, like [sh, -c, "…"], not a string (serve)`,
		`mesh.yaml:8: modules.store.containers.registry.netwrok: unknown field "netwrok"; did you mean "network"?`,
	} {
		if err == nil || !strings.Contains(err.Error(), line) {
			t.Errorf("Error() = %v\nlacks %q", err, line)
		}
	}

	// Past MaxErrors, the rest is counted.
	var b strings.Builder
	b.WriteString("modules:\n  store:\n    containers:\n")
	for i := range MaxErrors + 5 {
		fmt.Fprintf(&b, "      c%02d: {image: x, restart: bad}\n", i)
	}
	_, err = Decode("mesh.yaml", []byte(b.String()))
	if err == nil || strings.Count(err.Error(), "\n") != MaxErrors || !strings.HasSuffix(err.Error(), "(and 5 more errors)") {
		t.Errorf("Error() = %v, want %d errors and (and 5 more errors)", err, MaxErrors)
	}
	// One more is one more error.
	b.Reset()
	b.WriteString("modules:\n  store:\n    containers:\n")
	for i := range MaxErrors + 1 {
		fmt.Fprintf(&b, "      c%02d: {image: x, restart: bad}\n", i)
	}
	_, err = Decode("mesh.yaml", []byte(b.String()))
	if err == nil || !strings.HasSuffix(err.Error(), "\n(and 1 more error)") {
		t.Errorf("Error() = %v, want it to end (and 1 more error)", err)
	}
}

// TestDecodeReportsTyposWithTheRest: a field typo does not hide the file's
// other mistakes until the next pass: a bad module name, a
// restart value and an unknown depends-on come in the same error, in line
// order.
func TestDecodeReportsTyposWithTheRest(t *testing.T) {
	src := `modules:
  Bad_Mod:
    containers:
      a:
        image: meshtest/busybox:1
        restrat: always
  good:
    containers:
      b:
        image: meshtest/busybox:1
        restart: sometimes
        depends-on: [nosuch]
`
	_, err := Decode("mesh.yaml", []byte(src))
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		`mesh.yaml:2: modules.Bad_Mod: module name "Bad_Mod" is invalid`,
		`mesh.yaml:6: modules.Bad_Mod.containers.a.restrat: unknown field "restrat"`,
		`mesh.yaml:11: modules.good.containers.b.restart: "sometimes" is not one of`,
		`mesh.yaml:12: modules.good.containers.b.depends-on[0]: unknown container "nosuch"`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d errors, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("error %d = %q, want it to start %q", i, lines[i], w)
		}
	}
}
