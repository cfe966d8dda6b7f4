package lifecycle_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// TestEngineSpecSecretsAndRuntimeFields follows secrets, configs and the
// runtime fields from the file through applied.json (what a window's close
// creates from) to the engine's spec: each file is a read-only bind of the
// host file, its content in neither applied.json nor the spec label, and
// both ways give the same spec.
func TestEngineSpecSecretsAndRuntimeFields(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"pw.txt": "CANARY-pw", "app.conf": "listen 80"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "mesh.yaml")
	src := `modules:
  m:
    containers:
      c:
        image: x
        volumes: ["data:/data"]
        secrets: [{name: pw, file: pw.txt}]
        configs: [{file: app.conf, target: /etc/app.conf}]
        expose: [80]
        sysctls: {net.core.somaxconn: 1024}
        ulimits: {nproc: 64, nofile: {soft: 10, hard: 20}}
        privileged: true
        stdin-open: true
        tty: true
        dns: [198.18.0.2, 198.18.0.1]
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := mesh.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(&record.Applied{File: f})
	if err != nil {
		t.Fatal(err)
	}
	var a record.Applied
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "CANARY") {
		t.Errorf("applied.json holds a secret's content: %s", b)
	}
	key := []byte("key-0123456789abcdef")
	var labels []string
	for step, file := range map[string]*mesh.File{"from the file": f, "from applied.json": a.File} {
		ds, err := record.Desire(file, nil, nil, key)
		if err != nil {
			t.Fatal(err)
		}
		es := ds[0].EngineSpec("scope")
		want := engine.Spec{
			Image: "x", Restart: mesh.DefaultRestart, Labels: es.Labels,
			Binds:      []string{"data:/data"},
			Files:      map[string]string{"/run/secrets/pw": filepath.Join(dir, "pw.txt"), "/etc/app.conf": filepath.Join(dir, "app.conf")},
			Expose:     []string{"80/tcp"},
			Sysctls:    map[string]string{"net.core.somaxconn": "1024"},
			Ulimits:    []engine.Ulimit{{Name: "nofile", Soft: 10, Hard: 20}, {Name: "nproc", Soft: 64, Hard: 64}},
			Privileged: true, StdinOpen: true, Tty: true,
			DNS: []string{"198.18.0.2", "198.18.0.1"},
		}
		if !reflect.DeepEqual(es, want) {
			t.Errorf("%s: lifecycle.EngineSpec =\n%+v\nwant\n%+v", step, es, want)
		}
		label := es.Labels[lifecycle.LabelSpec]
		if strings.Contains(label, "CANARY") || !strings.Contains(label, `"hash":"hmac-sha256:`) {
			t.Errorf("%s: the recorded spec: %s", step, label)
		}
		labels = append(labels, label)
	}
	if labels[0] != labels[1] {
		t.Errorf("the spec from applied.json differs:\n%s\n%s", labels[0], labels[1])
	}
}
