package mesh

import (
	"reflect"
	"strings"
	"testing"
)

// TestDecodeWhileChanged decodes a step that holds a container changed.
// Its change has each field a change takes. A step with no stopped
// container needs no run.image.
func TestDecodeWhileChanged(t *testing.T) {
	f, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry: {image: meshtest/registry:1, env: {A: "1"}}
    steps:
      garbage-collect:
        while-changed:
          registry:
            env: {REGISTRY_STORAGE_MAINTENANCE_READONLY: '{"enabled": true}'}
            command: [serve, /etc/ro.yml]
            entrypoint: []
            healthcheck: {test: [CMD, "true"], interval: 1s}
        run:
          command: [garbage-collect]
`)))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Modules["store"].Steps["garbage-collect"]
	ch := s.WhileChanged["registry"]
	want := &Change{Env: EnvVars{"REGISTRY_STORAGE_MAINTENANCE_READONLY": `{"enabled": true}`},
		Command: []string{"serve", "/etc/ro.yml"}, Entrypoint: []string{},
		Healthcheck: &Healthcheck{Test: HealthTest{"CMD", "true"}, Interval: Duration(1e9)}}
	if !reflect.DeepEqual(ch, want) {
		t.Errorf("change = %+v\nwant %+v", ch, want)
	}
	if got := s.Held(); !reflect.DeepEqual(got, []string{"registry"}) {
		t.Errorf("Held = %v", got)
	}
}

// TestDecodeWhileChangedMistakes decodes a step with one mistake of each
// kind while-changed can have. All come in one error, in line order. A
// field that would change what the container is says why it is refused.
func TestDecodeWhileChangedMistakes(t *testing.T) {
	_, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry: {image: meshtest/registry:1}
      cache: {image: meshtest/busybox:1}
    steps:
      garbage-collect:
        while-stopped: [cache]
        while-changed:
          registry:
            image: meshtest/registry:2
            env: {"A B": x}
          cache: {command: [a]}
          registyr: {command: [a]}
          web: {}
        run:
          command: [garbage-collect]
`)))
	why := "a window changes how a container runs, not what it is: while-changed takes env, entrypoint, command, healthcheck"
	want := []string{
		`mesh.yaml:11: modules.store.steps.garbage-collect.while-changed.registry.image: unknown field "image"; ` + why,
		`mesh.yaml:12: modules.store.steps.garbage-collect.while-changed.registry.env.A B: "A B" is not a variable name`,
		`mesh.yaml:13: modules.store.steps.garbage-collect.while-changed.cache: container "cache" is in while-stopped too: a window holds a container stopped or changed, not both`,
		`mesh.yaml:14: modules.store.steps.garbage-collect.while-changed.registyr: unknown container "registyr" (this module has: cache, registry); did you mean "registry"?`,
		`mesh.yaml:15: modules.store.steps.garbage-collect.while-changed.web: unknown container "web" (this module has: cache, registry)`,
		`mesh.yaml:15: modules.store.steps.garbage-collect.while-changed.web: changes nothing: give env, command, entrypoint or healthcheck, or drop web from while-changed`,
	}
	if err == nil {
		t.Fatal("Decode took the file")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("Decode = %v\nwant %d errors", err, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("error %d = %s\nwant %s…", i, lines[i], want[i])
		}
	}
}

// TestDecodeWhileChangedTypo suggests the field meant beside why.
func TestDecodeWhileChangedTypo(t *testing.T) {
	_, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry: {image: meshtest/registry:1}
    steps:
      gc:
        while-changed: {registry: {comand: [a]}}
        run: {command: [a]}
`)))
	if err == nil || !strings.Contains(err.Error(), `unknown field "comand"; a window changes how a container runs, not what it is`) ||
		!strings.Contains(err.Error(), `(did you mean "command"?)`) {
		t.Errorf("Decode = %v", err)
	}
}
