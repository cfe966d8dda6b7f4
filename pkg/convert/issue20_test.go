package convert

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

// refusal is the message of the refusal of path in err, and how many
// refusals name path.
func refusal(t *testing.T, err error, path string) (string, int) {
	t.Helper()
	var re *RefusedError
	if !errors.As(err, &re) {
		t.Fatalf("err = %v, want a refusal", err)
	}
	msg, n := "", 0
	for _, k := range re.Keys {
		if rest, ok := strings.CutPrefix(k, path+": "); ok {
			msg, n = rest, n+1
		}
	}
	return msg, n
}

// TestConvertBuildRunsTheLedgersBuild: a service built from source runs its
// ledger module's current build (MODULE-SERVICE), with or without image:,
// and the note says how CI records each build.
func TestConvertBuildRunsTheLedgersBuild(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    build: {context: ., dockerfile: web.Dockerfile, args: {TOKEN: "${TOKEN}"}}
  api:
    build: .
    image: registry.example:5000/shop/api:1
    pull_policy: build
`})
	t.Chdir(filepath.Dir(path))
	r, err := Convert(context.Background(), Options{Files: []string{path}, Env: []string{"TOKEN=hunter2"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"web": "REGISTRY/web@sha256:", "api": "registry.example:5000/shop/api@sha256:"} {
		ct, note := r.File.Modules["shop"].Containers[name], r.Notes[name]
		if ct.Artifact != "shop-"+name || ct.Image != "" {
			t.Errorf("%s: artifact %q image %q, want artifact shop-%s", name, ct.Artifact, ct.Image, name)
		}
		for _, s := range []string{"meshctl build request shop-" + name, "meshctl build record ID --image REF", want, "context ."} {
			if !strings.Contains(note, s) {
				t.Errorf("%s's note lacks %q:\n%s", name, s, note)
			}
		}
		if strings.Contains(note, "hunter2") {
			t.Errorf("%s's note shows a build argument's value:\n%s", name, note)
		}
	}
	if !strings.Contains(r.Notes["web"], "dockerfile web.Dockerfile") || !strings.Contains(r.Notes["web"], "args TOKEN") {
		t.Errorf("web's note: %s", r.Notes["web"])
	}
}

// TestConvertEnvFileStaysRelative: env_file is written relative to the
// working directory (where the output is saved, or applied from), not as
// the absolute path of the checkout it was converted in.
func TestConvertEnvFileStaysRelative(t *testing.T) {
	dir := t.TempDir()
	app := filepath.Join(dir, "app")
	if err := os.MkdirAll(app, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"compose.yaml": "name: shop\nservices:\n  db:\n    image: busybox\n    env_file: [db.env, ../shared.env]\n",
		"db.env": "A=1\n"} {
		if err := os.WriteFile(filepath.Join(app, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	r, err := Convert(context.Background(), Options{Files: []string{"app/compose.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.File.Modules["shop"].Containers["db"].EnvFile; !slices.Equal(got, []string{"app/db.env", "shared.env"}) {
		t.Errorf("env-file = %q, want [app/db.env shared.env]", got)
	}
}

// TestConvertNeverWritesShellValues: an environment value from the shell (a
// bare name, ${X}) is refused, saying to use an env_file, and is nowhere in
// the error; values from .env, defaults and ${X} outside environment: are
// written as Compose reads them.
func TestConvertNeverWritesShellValues(t *testing.T) {
	path := write(t, map[string]string{".env": "LEVEL=debug\n", "compose.yaml": `
name: shop
services:
  web:
    image: busybox:${TAG}
    environment:
      - API_TOKEN
      - DB_URL=postgres://app:${DB_PASSWORD}@db/app
      - LEVEL=${LEVEL}
      - MODE=${MODE:-prod}
  worker:
    image: busybox
    environment: {SECRET: null}
`})
	env := []string{"API_TOKEN=tok-3141", "DB_PASSWORD=pw-2718", "SECRET=sec-1618", "TAG=1"}
	_, err := Convert(context.Background(), Options{Files: []string{path}, Env: env})
	for _, p := range []string{"services.web.environment.API_TOKEN", "services.web.environment.DB_URL", "services.worker.environment.SECRET"} {
		if msg, n := refusal(t, err, p); n != 1 || !strings.Contains(msg, "from the shell") || !strings.Contains(msg, "env_file") {
			t.Errorf("%s refused %d times: %q", p, n, msg)
		}
	}
	for _, v := range []string{"tok-3141", "pw-2718", "sec-1618"} {
		if strings.Contains(err.Error(), v) {
			t.Errorf("a value from the shell is in the error:\n%v", err)
		}
	}

	// Without them, the rest converts: .env and defaults are written.
	path = write(t, map[string]string{".env": "LEVEL=debug\n", "compose.yaml": `
name: shop
services:
  web:
    image: busybox:${TAG}
    environment:
      - LEVEL=${LEVEL}
      - MODE=${MODE:-prod}
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	web := r.File.Modules["shop"].Containers["web"]
	if web.Image != "busybox:1" || web.Env["LEVEL"] != "debug" || web.Env["MODE"] != "prod" {
		t.Errorf("web = %+v", web)
	}
}

// TestConvertDependsOnRequiredRestart: required: false and restart: true
// are refused by name; required: true (Compose's default) is carried.
func TestConvertDependsOnRequiredRestart(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    depends_on:
      db: {condition: service_healthy, required: false}
      cache: {condition: service_started, restart: true}
      queue: {condition: service_started, required: true}
  db: {image: busybox}
  cache: {image: busybox}
  queue: {image: busybox}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	for _, p := range []string{"services.web.depends_on.db.required", "services.web.depends_on.cache.restart"} {
		if msg, n := refusal(t, err, p); n != 1 || !strings.Contains(msg, "remove") {
			t.Errorf("%s refused %d times: %q", p, n, msg)
		}
	}
	if _, n := refusal(t, err, "services.web.depends_on.queue.required"); n != 0 {
		t.Errorf("required: true refused")
	}
}

// TestConvertSaysComposeGoInItsWords: compose-go's log lines are captured
// (nothing raw on stderr), each warning said once, naming the file and key,
// and none for a variable that is set; its errors name the file and what
// to do.
func TestConvertSaysComposeGoInItsWords(t *testing.T) {
	var raw bytes.Buffer
	logrus.SetOutput(&raw)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })
	path := write(t, map[string]string{"compose.yaml": `
version: "3.8"
name: shop
services:
  web:
    image: busybox:${TAG}
    command: ["echo", "${GREETING}", "${GREETING}"]
`})
	t.Chdir(filepath.Dir(path))
	r, err := Convert(context.Background(), Options{Files: []string{path}, Env: []string{"TAG=1"}})
	if err != nil {
		t.Fatal(err)
	}
	if raw.Len() > 0 {
		t.Errorf("compose-go logged raw:\n%s", raw.String())
	}
	want := []string{
		"compose.yaml: services.web.command[1]: ${GREETING} is not set, so Compose reads it as an empty string: " +
			"set GREETING in the environment or in .env, or give a default (${GREETING:-value}), then convert again",
		"compose.yaml: version is obsolete and ignored, by Compose as by meshctl: remove it",
	}
	if !slices.Equal(r.Warnings, want) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(r.Warnings, "\n"), strings.Join(want, "\n"))
	}

	path = write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    container_name: web
    deploy: {replicas: 2}
`})
	t.Chdir(filepath.Dir(path))
	_, err = Convert(context.Background(), Options{Files: []string{path}})
	var le *LoadError
	if !errors.As(err, &le) || !strings.HasPrefix(err.Error(), "compose.yaml: service web: container_name cannot be used with deploy.replicas") ||
		strings.Contains(err.Error(), "invalid compose project") {
		t.Errorf("err = %v", err)
	}
}

// TestConvertRefusesOnce: a key two checks find (a top-level volume's
// external, by its keys and by the service that mounts it) is refused and
// counted once.
func TestConvertRefusesOnce(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {image: busybox, volumes: ["data:/d"]}
  db: {image: busybox, volumes: ["data:/d"]}
volumes:
  data: {external: true}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	if _, n := refusal(t, err, "volumes.data.external"); n != 1 {
		t.Errorf("volumes.data.external refused %d times:\n%v", n, err)
	}
	if re := (*RefusedError)(nil); errors.As(err, &re) && len(re.Keys) != 1 {
		t.Errorf("%d refusals, want 1:\n%v", len(re.Keys), err)
	}
}

// TestConvertRefusalsNameTheNextStep: every key meshctl has no field for
// says why and what to do, not only "not carried over".
func TestConvertRefusalsNameTheNextStep(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    container_name: shop-web
    ulimits: {nofile: 1024}
    privileged: true
    secrets: [token]
    configs: [conf]
    networks: [front]
    expose: ["80"]
    sysctls: {net.core.somaxconn: 1024}
    runtime: runc
    platform: linux/amd64
    stdin_open: true
    tty: true
    dns: [1.1.1.1]
networks: {front: {}}
secrets: {token: {file: ./token}}
configs: {conf: {file: ./conf}}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	for _, key := range []string{"container_name", "ulimits", "privileged", "secrets", "configs", "networks", "expose", "sysctls",
		"runtime", "platform", "stdin_open", "tty", "dns"} {
		msg, n := refusal(t, err, "services.web."+key)
		if n != 1 || strings.HasPrefix(msg, "not carried over by meshctl") || !strings.Contains(msg, ": ") {
			t.Errorf("%s: %q", key, msg)
		}
	}
	if msg, _ := refusal(t, err, "services.web.container_name"); !strings.Contains(msg, "shop.web") {
		t.Errorf("container_name does not say the container's name: %q", msg)
	}
	for _, key := range []string{"secrets", "configs", "networks.front"} {
		if msg, n := refusal(t, err, key); n != 1 || strings.HasPrefix(msg, "not carried over by meshctl") {
			t.Errorf("%s: %q", key, msg)
		}
	}
}
