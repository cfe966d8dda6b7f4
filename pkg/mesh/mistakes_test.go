package mesh

import (
	"strings"
	"testing"
)

// TestDecodeReportsEveryMistakeAtOnce decodes a file of five mistakes of
// five kinds. A misspelt field, a bad value, a wrong type, an unknown
// container in while-stopped and a bad duration all come in one error, in
// line order. None is left for the next pass.
func TestDecodeReportsEveryMistakeAtOnce(t *testing.T) {
	_, err := Decode("mesh.yaml", []byte(src(`
modules:
  store:
    containers:
      registry:
        imgae: meshtest/registry:1
        restart: sometimes
        ports: 5000
    steps:
      garbage-collect:
        while-stopped: [registy]
        timeout: 30 minutes
        run:
          command: [garbage-collect]
`)))
	want := `mesh.yaml:5: modules.store.containers.registry.imgae: unknown field "imgae"; did you mean "image"?
mesh.yaml:6: modules.store.containers.registry.restart: "sometimes" is not one of no, always, unless-stopped, on-failure
mesh.yaml:7: modules.store.containers.registry.ports: want a list of strings, like ["127.0.0.1:5000:5000"], not a number (5000)
mesh.yaml:10: modules.store.steps.garbage-collect.while-stopped[0]: unknown container "registy" (this module has: registry)
mesh.yaml:11: modules.store.steps.garbage-collect.timeout: invalid duration "30 minutes" (use e.g. 90s, 30m, 2h)`
	if err == nil || err.Error() != want {
		t.Errorf("Decode = %v\nwant %s", err, want)
	}
}

// TestDecodeTakesNoZeroForAMistake decodes files where a value did not
// decode, beside a mistake of validation. The decoder leaves a zero where
// the value was. The validator must not report that zero too, as a missing
// image or an unknown container. Each file's real second mistake is
// reported.
func TestDecodeTakesNoZeroForAMistake(t *testing.T) {
	const (
		store   = "modules:\n  store:\n    containers:\n"
		restart = `"sometimes" is not one of no, always, unless-stopped, on-failure`
	)
	for _, tt := range []struct {
		name, src string
		want      []string
	}{
		{"image not a string", store + "      registry:\n        image: [a]\n        restart: sometimes\n", []string{
			"5: modules.store.containers.registry.image: want a string, not a list",
			"6: modules.store.containers.registry.restart: " + restart}},
		{"image misspelt", store + "      registry:\n        imgae: a\n        restart: sometimes\n", []string{
			`5: modules.store.containers.registry.imgae: unknown field "imgae"; did you mean "image"?`,
			"6: modules.store.containers.registry.restart: " + restart}},
		{"while-stopped not a list", store + "      registry: {image: x, restart: sometimes}\n" +
			"    steps:\n      gc:\n        while-stopped: registry\n        run: {command: [a]}\n", []string{
			"4: modules.store.containers.registry.restart: " + restart,
			"7: modules.store.steps.gc.while-stopped: want a list of strings, like [registry], not a string (registry)"}},
		{"run not a map", store + "      registry: {image: x, restart: sometimes}\n" +
			"    steps:\n      gc:\n        while-stopped: [registry]\n        run: [a]\n", []string{
			"4: modules.store.containers.registry.restart: " + restart,
			"8: modules.store.steps.gc.run: want a map like {image: …, command: […]}, not a list"}},
		{"container not a map", store + "      registry: 5\n      web:\n        image: x\n        restart: sometimes\n" +
			"        depends-on: [registry]\n    steps:\n      gc:\n        while-stopped: [registry]\n" +
			"        run: {command: [a], volumes-from: [registry]}\n", []string{
			"4: modules.store.containers.registry: want a container: a map like {image: …, command: […]}, not a number (5)",
			"7: modules.store.containers.web.restart: " + restart}},
		{"key twice in a container", store + "      registry:\n        image: x\n        image: y\n" +
			"      web: {image: x, restart: sometimes}\n    steps:\n      gc:\n        while-stopped: [registry]\n" +
			"        run: {command: [a]}\n", []string{
			`6: modules.store.containers.registry.image: mapping key "image" already defined at line 5`,
			"7: modules.store.containers.web.restart: " + restart}},
		{"module networks not a map", "modules:\n  store:\n    networks: [back]\n    containers:\n" +
			"      a:\n        image: x\n        restart: sometimes\n        networks: [back]\n", []string{
			"3: modules.store.networks: want a map of networks by name, like {back: {internal: true}}, not a list",
			"7: modules.store.containers.a.restart: " + restart}},
		{"alias misspelt, start-first", "modules:\n  store:\n    update-order: start-first\n" +
			"    networks: {back: {}}\n    containers:\n      a:\n        image: x\n        restart: sometimes\n" +
			"        networks: {back: {aliasses: [x]}}\n", []string{
			"8: modules.store.containers.a.restart: " + restart,
			`9: modules.store.containers.a.networks.back.aliasses: unknown field "aliasses"`}},
		{"healthcheck, logging and secret", store + "      registry:\n        image: x\n        restart: sometimes\n" +
			"        healthcheck: {test: 5}\n        secrets: [pw]\n        logging: {driver: [x], options: {a: b}}\n", []string{
			"6: modules.store.containers.registry.restart: " + restart,
			"7: modules.store.containers.registry.healthcheck.test: want a list of strings, like [a, b], not a number (5)",
			"8: modules.store.containers.registry.secrets[0]: want a map like {name: db_password, file: db_password.txt} (the file on the host itself), not a string (pw)",
			"9: modules.store.containers.registry.logging.driver: want a string, not a list"}},
		{"a list item not a string", store + "      registry:\n        image: x\n        restart: sometimes\n" +
			"        volumes:\n          - [x]\n          - bad\n", []string{
			"6: modules.store.containers.registry.restart: " + restart,
			"8: modules.store.containers.registry.volumes[0]: want a string, not a list"}},
		{"module not a map", "modules:\n  store: [a]\n  web:\n    containers:\n" +
			"      a: {image: x, restart: sometimes, depends-on: [store.registry]}\n", []string{
			"2: modules.store: want a module: a map with containers: and steps:, not a list",
			"5: modules.web.containers.a.restart: " + restart}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("mesh.yaml", []byte(tt.src))
			want := "mesh.yaml:" + strings.Join(tt.want, "\nmesh.yaml:")
			if err == nil || err.Error() != want {
				t.Errorf("Decode = %v\nwant %s", err, want)
			}
		})
	}
}

// TestDecodeCapsEveryMistake decodes a file of more type errors and bad
// values than MaxErrors. The first MaxErrors are shown, and the rest are
// counted.
func TestDecodeCapsEveryMistake(t *testing.T) {
	var b strings.Builder
	b.WriteString("modules:\n  store:\n    containers:\n")
	for i := range MaxErrors {
		b.WriteString("      c" + string(rune('a'+i)) + ": {image: x, restart: bad}\n")
	}
	b.WriteString("    steps:\n      gc:\n        while-stopped: [nosuch]\n        timeout: soon\n        run: {command: [a]}\n")
	_, err := Decode("mesh.yaml", []byte(b.String()))
	if err == nil || strings.Count(err.Error(), "\n") != MaxErrors || !strings.HasSuffix(err.Error(), "(and 2 more errors)") {
		t.Errorf("Decode = %v\nwant %d errors and (and 2 more errors)", err, MaxErrors)
	}
}

// TestDecodeComposeFile decodes Compose files given as mesh files. Each is
// refused with one error that names meshctl convert, not with an unknown
// field for each of its keys. A mesh file with a stray services key is
// only that.
func TestDecodeComposeFile(t *testing.T) {
	const convert = "services: this is a Compose file, not a mesh file: convert it with meshctl convert -f "
	for _, tt := range []struct{ name, src, want string }{
		{"compose.yaml", "services:\n  web:\n    image: nginx\n    ports: [\"80:80\"]\n",
			"compose.yaml:1: " + convert + "compose.yaml > mesh.yaml, then apply mesh.yaml"},
		{"docker-compose.yml", "version: \"3.8\"\nname: shop\nservices:\n  web: {image: nginx}\nvolumes: {data: {}}\n",
			"docker-compose.yml:3: " + convert + "docker-compose.yml > mesh.yaml, then apply mesh.yaml"},
		{"my app/compose.json", `{"services": {"web": {"image": "nginx"}}}`,
			"my app/compose.json:1: " + convert + "'my app/compose.json' > mesh.yaml, then apply mesh.yaml"},
		{"<stdin>", "services: {web: {image: nginx}}\n",
			"<stdin>:1: " + convert + "compose.yaml > mesh.yaml, then apply mesh.yaml"},
		{"mesh.yaml", "modules: {}\nservices: {web: {image: nginx}}\n",
			`mesh.yaml:2: services: unknown field "services" (fields here: modules)`},
	} {
		_, err := Decode(tt.name, []byte(tt.src))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Decode(%s) = %v\nwant %s", tt.name, err, tt.want)
		}
	}
}
