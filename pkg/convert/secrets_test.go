package convert

import (
	"context"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestConvertSecretsConfigsAndFields: file secrets and
// configs become secrets: and configs: (the file relative to the output,
// Compose's targets kept), uid/gid/mode are said to be ignored, the
// runtime fields are carried, container_name becomes a note naming the
// container, and the result is a mesh file that decodes.
func TestConvertSecretsConfigsAndFields(t *testing.T) {
	path := write(t, map[string]string{
		"db_password.txt": "hunter2\n",
		"nginx.conf":      "events {}\n",
		"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    container_name: shop-web
    secrets:
      - db_password
      - {source: api_key, target: api.key, mode: 0400}
    configs:
      - source: proxy
        target: /etc/nginx/nginx.conf
      - proxy_rel
    expose: [80, "53/udp"]
    sysctls: [net.core.somaxconn=1024]
    ulimits: {nofile: {soft: 1024, hard: 2048}, nproc: 512}
    privileged: true
    stdin_open: true
    tty: true
    dns: [198.18.0.53]
secrets:
  db_password: {file: ./db_password.txt}
  api_key: {file: ./keys/api}
configs:
  proxy: {file: ./nginx.conf}
  proxy_rel: {file: ./nginx.conf}
`})
	t.Chdir(filepath.Dir(path))
	r, err := Convert(context.Background(), Options{Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	web := r.File.Modules["shop"].Containers["web"]
	if want := []mesh.FileMount{{File: "db_password.txt", Name: "db_password"}, {Name: "api_key", File: "keys/api", Target: "api.key"}}; !reflect.DeepEqual(web.Secrets, want) {
		t.Errorf("secrets = %+v, want %+v", web.Secrets, want)
	}
	if want := []mesh.FileMount{{Name: "proxy", File: "nginx.conf", Target: "/etc/nginx/nginx.conf"}, {Name: "proxy_rel", File: "nginx.conf"}}; !reflect.DeepEqual(web.Configs, want) {
		t.Errorf("configs = %+v, want %+v", web.Configs, want)
	}
	if !slices.Equal(web.Expose, []string{"80", "53/udp"}) || web.Sysctls["net.core.somaxconn"] != "1024" ||
		web.Ulimits["nofile"] != (mesh.Ulimit{Soft: 1024, Hard: 2048}) || web.Ulimits["nproc"] != (mesh.Ulimit{Soft: 512, Hard: 512}) ||
		!web.Privileged || !web.StdinOpen || !web.TTY || !slices.Equal(web.DNS, []string{"198.18.0.53"}) {
		t.Errorf("web = %+v", web.ContainerFields)
	}
	if note := r.Notes["web"]; !strings.Contains(note, "container_name shop-web is not kept: meshctl names this container shop.web") {
		t.Errorf("note = %q", note)
	}
	if !slices.ContainsFunc(r.Warnings, func(w string) bool {
		return strings.Contains(w, "services.web.secrets[1]: uid, gid and mode are ignored")
	}) {
		t.Errorf("warnings = %q", r.Warnings)
	}
	data, err := yaml.Marshal(r.File)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mesh.Decode("mesh.yaml", data); err != nil {
		t.Errorf("the result does not decode: %v\n%s", err, data)
	}
}

// TestConvertRefusesSecretsItCannotMakeFiles: a secret from the
// environment, an external one and a config's inline content are refused
// by name, each saying how to make it a file; no value is in the refusal.
func TestConvertRefusesSecretsItCannotMakeFiles(t *testing.T) {
	path := write(t, map[string]string{"compose.yaml": `
name: shop
services:
  web:
    image: busybox
    secrets: [token, vault]
    configs: [inline]
secrets:
  token: {environment: API_TOKEN}
  vault: {external: true}
configs:
  inline: {content: "CANARY-inline"}
`})
	_, err := Convert(context.Background(), Options{Files: []string{path}, Env: []string{"API_TOKEN=CANARY-token"}})
	for key, want := range map[string]string{
		"secrets.token.environment": "takes its value from the environment variable API_TOKEN",
		"secrets.vault.external":    "write it to a file (mode 600) and give file: instead",
		"configs.inline.content":    "put it in a file next to the Compose file and give file: instead",
	} {
		if msg, n := refusal(t, err, key); n != 1 || !strings.Contains(msg, want) {
			t.Errorf("%s refused %d times: %q, want %q", key, n, msg, want)
		}
	}
	if strings.Contains(err.Error(), "CANARY") {
		t.Errorf("a value is in the refusal:\n%v", err)
	}
}
