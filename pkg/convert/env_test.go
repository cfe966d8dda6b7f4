package convert

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

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
// the error; values from .env, defaults, $$X (no variable) and ${X}
// outside environment: are written as Compose reads them.
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
      - LITERAL=$$DB_PASSWORD
`})
	r, err := Convert(context.Background(), Options{Files: []string{path}, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	web := r.File.Modules["shop"].Containers["web"]
	if web.Image != "busybox:1" || web.Env["LEVEL"] != "debug" || web.Env["MODE"] != "prod" || web.Env["LITERAL"] != "$DB_PASSWORD" {
		t.Errorf("web = %+v", web)
	}
}

// TestConvertBindInProjectWarns: a bind mount from the project's directory
// is written absolute (a mesh file's bind mounts are), and convert says so.
func TestConvertBindInProjectWarns(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": "name: shop\nservices:\n  web: {image: busybox, volumes: [./conf:/etc/conf:ro, /srv:/srv]}\n"})
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(filepath.Dir(path), "conf")
	if got := r.File.Modules["shop"].Containers["web"].Volumes; !slices.Equal(got, []string{abs + ":/etc/conf:ro", "/srv:/srv"}) {
		t.Errorf("volumes = %q", got)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "services.web.volumes[0]: conf, in the project's directory, is written as the absolute path "+abs) {
		t.Errorf("warnings: %q", r.Warnings)
	}
}
