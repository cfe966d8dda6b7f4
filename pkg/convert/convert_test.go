package convert

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/fault"
)

func write(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "compose.yaml")
}

// TestConvertRefusesByName: every key meshctl cannot carry is named, all of
// them at once, and nothing is converted.
func TestConvertRefusesByName(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    build: .
    image: shop/web:1
    secrets: [token]
    networks: {front: {ipv4_address: 198.18.9.9}}
    environment: [FROM_SHELL]
    dns_search: [example.com]
    healthcheck: {test: ["CMD", "true"], start_interval: 1s}
    depends_on:
      migrate: {condition: service_completed_successfully}
    deploy: {mode: global}
    x-owner: team-a
  migrate:
    image: shop/web:1
    runtime: runsc
networks:
  front: {driver: overlay}
secrets:
  token: {environment: FROM_SHELL}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}, Env: []string{"FROM_SHELL=1"}})
	var re *RefusedError
	if !errors.As(err, &re) || re.Fault() != fault.BadInput {
		t.Fatalf("Convert = %v, want a refusal", err)
	}
	for _, key := range []string{
		"networks.front.driver", "secrets.token.environment", "services.migrate.runtime",
		"services.web.deploy.mode", "services.web.environment.FROM_SHELL",
		"services.web.dns_search", "services.web.healthcheck.start_interval", "services.web.networks.front.ipv4_address",
		"services.web.depends_on.migrate.condition",
	} {
		if !slices.ContainsFunc(re.Keys, func(k string) bool { return strings.HasPrefix(k, key+":") }) {
			t.Errorf("%s not refused; refused:\n%s", key, strings.Join(re.Keys, "\n"))
		}
	}
	for _, k := range re.Keys {
		if strings.Contains(k, "x-owner") {
			t.Errorf("an x- extension was refused: %s", k)
		}
	}
}

// TestConvertCarriesOver: interpolation with .env, profiles, env_file kept
// a file, named volumes under Compose's name, and the result decodes.
func TestConvertCarriesOver(t *testing.T) {
	path := write(t, map[string]string{
		".env":   "TAG=7\n",
		"db.env": "PASSWORD=secret\n",
		"compose.yaml": `
name: shop
services:
  web:
    image: shop/web:${TAG}
    environment: {MODE: prod}
    ports: ["127.0.0.1:8080:80", "9000/udp"]
    depends_on: [db]
    restart: always
    stop_signal: SIGQUIT
    healthcheck: {test: wget -q -O- http://127.0.0.1/, interval: 2s, retries: 5}
    cap_drop: [ALL]
    mem_limit: 128m
    init: true
  db:
    image: shop/db:1
    env_file: db.env
    volumes: ["data:/var/lib/db", {type: tmpfs, target: /run, tmpfs: {size: 1048576}}]
    network_mode: host
  debug:
    image: busybox
    profiles: [debug]
volumes:
  data: {}
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	module, m := r.Module, r.File.Modules[r.Module]
	if module != "shop" || len(m.Containers) != 2 {
		t.Fatalf("module %s with %d containers, want shop with web and db (debug's profile is off)", module, len(m.Containers))
	}
	web, db := m.Containers["web"], m.Containers["db"]
	if web.Image != "shop/web:7" || web.Restart != "always" || web.StopSignal != "SIGQUIT" || !web.Init || web.Memory != "128m" ||
		!slices.Equal(web.DependsOn, []string{"db"}) || !slices.Equal(web.Ports, []string{"127.0.0.1:8080:80", "9000/udp"}) ||
		web.Healthcheck == nil || web.Healthcheck.Retries != 5 || web.Healthcheck.Test[0] != "CMD-SHELL" {
		t.Errorf("web = %+v", web)
	}
	if db.Restart != "no" || db.Network != "host" || !slices.Equal(db.Volumes, []string{"shop_data:/var/lib/db"}) ||
		!slices.Equal(db.Tmpfs, []string{"/run:size=1048576"}) || len(db.EnvFile) != 1 || db.Env["PASSWORD"] != "" {
		t.Errorf("db = %+v", db)
	}
	// With the debug profile, debug is there too.
	r, err = Convert(context.Background(), Options{Files: []string{path}, Profiles: []string{"debug"}})
	if err != nil || r.File.Modules["shop"].Containers["debug"] == nil {
		t.Errorf("--profile debug: %v", err)
	}
}

// TestConvertFindsTheProject: without -f, the project is compose.yaml (or
// docker-compose.yml…) in the working directory, as Compose finds it; and
// COMPOSE_FILE names it, as for Compose.
func TestConvertFindsTheProject(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": "name: found\nservices:\n  web:\n    image: meshtest/busybox:1\n"})
	t.Chdir(filepath.Dir(path))
	r, err := Convert(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Module != "found" || r.File.Modules["found"].Containers["web"] == nil {
		t.Errorf("converted module %q: %+v", r.Module, r.File.Modules)
	}

	other := write(t, map[string]string{"compose.yaml": "name: named\nservices:\n  db:\n    image: meshtest/busybox:1\n"})
	r, err = Convert(context.Background(), Options{Env: []string{"COMPOSE_FILE=" + other}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Module != "named" {
		t.Errorf("with COMPOSE_FILE, converted module %q, want named", r.Module)
	}
}

// TestConvertUpdateOrder: deploy.update_config.order carries over as
// update-order where it can hold; start-first on a service that publishes
// a port is refused by name, with why.
func TestConvertUpdateOrder(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  api: {image: busybox, deploy: {update_config: {order: start-first, parallelism: 1}}}
  db: {image: busybox, deploy: {update_config: {order: stop-first}}}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}})
	if msg, n := refusal(t, err, "services.api.deploy.update_config.parallelism"); n != 1 || msg == "" {
		t.Errorf("parallelism refused %d times: %v", n, err)
	}
	path = write(t, map[string]string{"compose.yaml": `
name: shop
services:
  api: {image: busybox, deploy: {update_config: {order: start-first}}}
  db: {image: busybox, deploy: {update_config: {order: stop-first}}}
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.File.Modules["shop"].Containers["api"].UpdateOrder; got != "start-first" {
		t.Errorf("api: update-order %q, want start-first", got)
	}
	if got := r.File.Modules["shop"].Containers["db"].UpdateOrder; got != "stop-first" {
		t.Errorf("db: update-order %q, want stop-first", got)
	}
	path = write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web: {image: busybox, ports: ["127.0.0.1:8080:80"], deploy: {update_config: {order: start-first}}}
`})
	_, err = Convert(context.Background(), Options{Files: []string{path}})
	if msg, n := refusal(t, err, "services.web.deploy.update_config.order"); n != 1 || !strings.Contains(msg, "publishes a host port") {
		t.Errorf("web's start-first: %q (%d), want it refused for its port", msg, n)
	}
}
