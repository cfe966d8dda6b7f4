package lifecycle_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// TestEngineSpecFields follows every container field from the file through
// applied.json (what a window's close creates from) to the engine's spec.
func TestEngineSpecFields(t *testing.T) {
	dir := t.TempDir()
	envFile := filepath.Join(dir, "app.env")
	if err := os.WriteFile(envFile, []byte("TOKEN=from-file\nMODE=file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mesh.yaml")
	src := `modules:
  m:
    containers:
      c:
        image: x
        env: {MODE: env}
        env-file: app.env
        healthcheck: {test: [CMD, "true"], interval: 1s}
        stop-signal: SIGQUIT
        stop-grace-period: 45s
        user: nobody
        working-dir: /srv
        hostname: box
        init: true
        read-only: true
        tmpfs: ["/run:size=1m", /tmp]
        cap-add: [NET_ADMIN]
        cap-drop: [ALL]
        memory: 64m
        cpus: 1.5
        pids-limit: 50
        logging: {driver: local, options: {max-size: 1m}}
        extra-hosts: ["db:10.0.0.2"]
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
	if strings.Contains(string(b), "from-file") {
		t.Errorf("applied.json holds an env-file value: %s", b)
	}
	for step, file := range map[string]*mesh.File{"from the file": f, "from applied.json": a.File} {
		ds, err := record.Desire(file, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		es := ds[0].EngineSpec("scope")
		want := engine.Spec{
			Image: "x", Env: []string{"MODE=env", "TOKEN=from-file"}, Restart: mesh.DefaultRestart, Labels: es.Labels,
			StopTimeout: ptr(45), StopSignal: "SIGQUIT",
			Healthcheck: &engine.Healthcheck{Test: []string{"CMD", "true"}, Interval: time.Second,
				Timeout: mesh.DefaultHealthTimeout, Retries: mesh.DefaultHealthRetries},
			User: "nobody", WorkingDir: "/srv", Hostname: "box", Init: true, ReadOnly: true,
			Tmpfs:  map[string]string{"/run": "size=1m", "/tmp": ""},
			CapAdd: []string{"CAP_NET_ADMIN"}, CapDrop: []string{"ALL"}, Memory: 64 << 20, NanoCPUs: 1.5e9,
			PidsLimit: 50, LogDriver: "local", LogOptions: map[string]string{"max-size": "1m"},
			ExtraHosts: []string{"db:10.0.0.2"},
		}
		if !reflect.DeepEqual(es, want) {
			t.Errorf("%s: lifecycle.EngineSpec =\n%+v\nwant\n%+v", step, es, want)
		}
		if strings.Contains(es.Labels[lifecycle.LabelSpec], "from-file") {
			t.Errorf("%s: the recorded spec holds an env-file value", step)
		}
		have, _ := mesh.DecodeSpec(es.Labels[lifecycle.LabelSpec])
		if have.Env["TOKEN"] != mesh.HashValue("from-file") {
			t.Errorf("%s: env-file value not hashed into the spec: %v", step, have.Env)
		}
		if got := lifecycle.StopTimeoutOf(engine.Container{Labels: es.Labels}); got != 45*time.Second {
			t.Errorf("%s: lifecycle.StopTimeoutOf = %v, want 45s", step, got)
		}
	}
	// A changed value in the env-file is a change of that variable.
	if err := os.WriteFile(envFile, []byte("TOKEN=rotated\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := mesh.HashValue("from-file")
	ds, err := record.Desire(f, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ds[0].Spec.Env["TOKEN"] == before || ds[0].Spec.Env["TOKEN"] != mesh.HashValue("rotated") {
		t.Errorf("env-file change not seen: %v", ds[0].Spec.Env)
	}
	// A missing env-file is exit 2, naming it.
	os.Remove(envFile)
	_, err = record.Desire(f, nil, nil, nil)
	var ee *mesh.EnvFileError
	if !errors.As(err, &ee) || ee.Fault() != fault.BadInput || !strings.Contains(err.Error(), envFile) {
		t.Errorf("missing env-file: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestStopTimeoutOfDefault: a container without a grace period, or made by
// an older meshctl, gets the default.
func TestStopTimeoutOfDefault(t *testing.T) {
	for _, labels := range []map[string]string{nil, {lifecycle.LabelSpec: `{"v":2,"image":"x"}`}, {lifecycle.LabelSpec: "garbage"}} {
		if got := lifecycle.StopTimeoutOf(engine.Container{Labels: labels}); got != lifecycle.StopTimeout {
			t.Errorf("StopTimeoutOf(%v) = %v, want %v", labels, got, lifecycle.StopTimeout)
		}
	}
}

// TestEngineSpecEntrypoint follows "entrypoint: []" from the file through
// applied.json (what a window's close recreates from) to the engine's spec,
// where only a non-nil empty Entrypoint clears the image's.
func TestEngineSpecEntrypoint(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		cleared   bool
	}{
		{"cleared", "modules:\n  m:\n    containers:\n      c: {image: x, entrypoint: []}\n", true},
		{"image's", "modules:\n  m:\n    containers:\n      c: {image: x}\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := mesh.Decode("mesh.yaml", []byte(tt.src))
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
			for step, file := range map[string]*mesh.File{"from the file": f, "from applied.json": a.File} {
				ds, err := record.Desire(file, nil, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				es := ds[0].EngineSpec("scope")
				if cleared := es.Entrypoint != nil && len(es.Entrypoint) == 0; cleared != tt.cleared || !tt.cleared && es.Entrypoint != nil {
					t.Errorf("%s: engine Entrypoint = %#v, want cleared=%v", step, es.Entrypoint, tt.cleared)
				}
				have, err := mesh.DecodeSpec(es.Labels[lifecycle.LabelSpec])
				if err != nil {
					t.Fatal(err)
				}
				if d := mesh.Diff(have, ds[0].Spec); len(d) != 0 {
					t.Errorf("%s: recorded spec differs from the desired one: %q", step, d)
				}
				if cleared := have.Entrypoint != nil && len(have.Entrypoint) == 0; cleared != tt.cleared {
					t.Errorf("%s: recorded entrypoint = %#v, want cleared=%v", step, have.Entrypoint, tt.cleared)
				}
			}
		})
	}
}
