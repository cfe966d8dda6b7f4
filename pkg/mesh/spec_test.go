package mesh

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const secret = "s3cr3t-Pa55w0rd-of-the-registry"

// registry is a container with every field of a spec set.
func registry() *Container {
	return &Container{
		Image:      "meshtest/registry:1",
		Entrypoint: []string{"/bin/registry"},
		Command:    []string{"serve", "/etc/docker/registry/config.yml"},
		Env:        map[string]string{"REGISTRY_HTTP_ADDR": "127.0.0.1:5000", "REGISTRY_SECRET": secret},
		Volumes:    []string{"store-data:/var/lib/registry", "/srv/conf:/etc/conf:ro"},
		Network:    "host",
		Ports:      []string{"127.0.0.1:5000:5000", "127.0.0.1:5001:5001/udp"},
		Restart:    "always",
		Labels:     map[string]string{"team": "infra", "tier": "storage"},
	}
}

func TestDiffEqual(t *testing.T) {
	for _, tt := range []struct {
		name       string
		have, want *Container
	}{
		{"same container", registry(), registry()},
		{"image only", &Container{Image: "x"}, &Container{Image: "x"}},
		// Not the entrypoint: an empty one clears the image's
		// (TestEntrypointCleared).
		{"empty lists and maps are unset", &Container{Image: "x"}, &Container{
			Image: "x", Command: []string{}, Env: map[string]string{},
			Volumes: []string{}, Ports: []string{}, Labels: map[string]string{},
		}},
		{"restart unset is unless-stopped", &Container{Image: "x"}, &Container{Image: "x", Restart: "unless-stopped"}},
		{"volume order", registry(), func() *Container {
			c := registry()
			slices.Reverse(c.Volumes)
			return c
		}()},
		{"port order", registry(), func() *Container {
			c := registry()
			slices.Reverse(c.Ports)
			return c
		}()},
		{"pull is not part of the spec", registry(), func() *Container {
			c := registry()
			c.Pull = "always"
			return c
		}()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			have, want := tt.have.Spec(tt.have.Image), tt.want.Spec(tt.want.Image)
			if d := Diff(have, want); len(d) != 0 {
				t.Errorf("Diff = %q, want none", d)
			}
			if d := Diff(want, have); len(d) != 0 {
				t.Errorf("reverse Diff = %q, want none", d)
			}
			if have.Encode() != want.Encode() {
				t.Errorf("Encode differs:\n%s\n%s", have.Encode(), want.Encode())
			}
		})
	}
}

func TestDiffReasons(t *testing.T) {
	for _, tt := range []struct {
		name   string
		image  string // the resolved image, when it differs from c.Image
		change func(c *Container)
		want   []string
	}{
		{name: "image", change: func(c *Container) { c.Image = "meshtest/registry:2" }, want: []string{"image: meshtest/registry:1 -> meshtest/registry:2"}},
		{name: "resolved artifact image", image: "store@sha256:2", change: func(*Container) {}, want: []string{"image: meshtest/registry:1 -> store@sha256:2"}},
		{name: "entrypoint", change: func(c *Container) { c.Entrypoint = []string{"/bin/sh", "-c"} }, want: []string{"entrypoint"}},
		{name: "entrypoint removed", change: func(c *Container) { c.Entrypoint = nil }, want: []string{"entrypoint"}},
		{name: "entrypoint cleared", change: func(c *Container) { c.Entrypoint = []string{} }, want: []string{"entrypoint"}},
		{name: "command", change: func(c *Container) { c.Command[1] = "/etc/other.yml" }, want: []string{"command"}},
		{name: "command order", change: func(c *Container) { slices.Reverse(c.Command) }, want: []string{"command"}},
		{name: "env changed", change: func(c *Container) { c.Env["REGISTRY_SECRET"] = "n3w-" + secret }, want: []string{"env.REGISTRY_SECRET"}},
		{name: "env added", change: func(c *Container) { c.Env["DEBUG"] = "1" }, want: []string{"env.DEBUG"}},
		{name: "env removed", change: func(c *Container) { delete(c.Env, "REGISTRY_SECRET") }, want: []string{"env.REGISTRY_SECRET"}},
		{name: "env set empty", change: func(c *Container) { c.Env["REGISTRY_SECRET"] = "" }, want: []string{"env.REGISTRY_SECRET"}},
		{name: "env two keys", change: func(c *Container) {
			c.Env["REGISTRY_SECRET"] = "other"
			c.Env["A"] = "1"
		}, want: []string{"env.A", "env.REGISTRY_SECRET"}},
		{name: "volumes", change: func(c *Container) { c.Volumes[1] = "/srv/conf:/etc/conf:rw" }, want: []string{"volumes"}},
		{name: "volume added", change: func(c *Container) { c.Volumes = append(c.Volumes, "cache:/cache") }, want: []string{"volumes"}},
		{name: "network", change: func(c *Container) { c.Network = "bridge" }, want: []string{"network"}},
		{name: "network unset", change: func(c *Container) { c.Network = "" }, want: []string{"network"}},
		{name: "ports", change: func(c *Container) { c.Ports[0] = "127.0.0.1:6000:5000" }, want: []string{"ports"}},
		{name: "restart", change: func(c *Container) { c.Restart = "on-failure" }, want: []string{"restart"}},
		{name: "restart unset", change: func(c *Container) { c.Restart = "" }, want: []string{"restart"}},
		{name: "label changed", change: func(c *Container) { c.Labels["team"] = "platform" }, want: []string{"labels.team"}},
		{name: "label added", change: func(c *Container) { c.Labels["owner"] = "ops" }, want: []string{"labels.owner"}},
		{name: "label removed", change: func(c *Container) { delete(c.Labels, "tier") }, want: []string{"labels.tier"}},
		{name: "everything", image: "meshtest/registry:2", change: func(c *Container) {
			c.Entrypoint, c.Command = nil, nil
			c.Env, c.Labels = nil, nil
			c.Volumes, c.Ports = nil, nil
			c.Network, c.Restart = "none", "no"
		}, want: []string{"image: meshtest/registry:1 -> meshtest/registry:2", "entrypoint", "command", "env.REGISTRY_HTTP_ADDR", "env.REGISTRY_SECRET",
			"volumes", "network", "ports", "restart", "labels.team", "labels.tier"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			have := registry().Spec("meshtest/registry:1")
			c := registry()
			tt.change(c)
			image := c.Image
			if tt.image != "" {
				image = tt.image
			}
			want := c.Spec(image)
			if d := Diff(have, want); !slices.Equal(d, tt.want) {
				t.Errorf("Diff = %q, want %q", d, tt.want)
			}
			// The same fields the other way round, the image's values swapped.
			back := slices.Clone(tt.want)
			if len(back) > 0 && IsImageReason(back[0]) {
				back[0] = ImageReason(want.Image, have.Image)
			}
			if d := Diff(want, have); !slices.Equal(d, back) {
				t.Errorf("reverse Diff = %q, want %q", d, back)
			}
			// The recorded spec of the old container, read back, gives the
			// same reasons.
			recorded, err := DecodeSpec(have.Encode())
			if err != nil {
				t.Fatal(err)
			}
			if d := Diff(recorded, want); !slices.Equal(d, tt.want) {
				t.Errorf("Diff from the recorded spec = %q, want %q", d, tt.want)
			}
			for _, r := range Diff(have, want) {
				if strings.Contains(r, secret) {
					t.Errorf("Diff names an env value: %q", r)
				}
			}
		})
	}
}

func TestSpecHidesEnvValues(t *testing.T) {
	s := registry().Spec("meshtest/registry:1")
	label := s.Encode()
	if strings.Contains(label, secret) || strings.Contains(label, "127.0.0.1:5000\"") {
		t.Errorf("Encode() holds an env value: %s", label)
	}
	if !strings.Contains(label, HashValue(secret)) {
		t.Errorf("Encode() = %s, want the hash %s of the value", label, HashValue(secret))
	}
	if !strings.HasPrefix(HashValue(secret), "sha256:") || HashValue(secret) == HashValue("n3w-"+secret) {
		t.Errorf("HashValue(%q) = %q", secret, HashValue(secret))
	}
	for k, v := range s.Env {
		if v != HashValue(registry().Env[k]) {
			t.Errorf("Env[%s] = %q, want the hash of the value", k, v)
		}
	}
	c := registry()
	c.Env["REGISTRY_SECRET"] = "n3w-" + secret
	for _, r := range Diff(s, c.Spec(c.Image)) {
		if strings.Contains(r, secret) || strings.Contains(r, "sha256:") {
			t.Errorf("Diff reason %q names a value", r)
		}
	}
}

func TestSpecDoesNotShareTheContainer(t *testing.T) {
	c := registry()
	s := c.Spec(c.Image)
	c.Entrypoint[0], c.Command[0], c.Volumes[0], c.Ports[0] = "x", "x", "x:/x", "1"
	c.Labels["team"] = "x"
	if d := Diff(s, registry().Spec(c.Image)); len(d) != 0 {
		t.Errorf("changing the container after Spec changed the spec: %q", d)
	}
}

func TestSpecRoundTrip(t *testing.T) {
	for _, c := range []*Container{registry(), {Image: "x"}, {Artifact: "store"}} {
		s := c.Spec("meshtest/x:1")
		label := s.Encode()
		got, err := DecodeSpec(label)
		if err != nil {
			t.Fatalf("DecodeSpec(%s): %v", label, err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("DecodeSpec(Encode(s)) = %+v, want %+v", got, s)
		}
		if d := Diff(got, s); len(d) != 0 {
			t.Errorf("Diff after round trip = %q", d)
		}
		if got.V != SpecVersion {
			t.Errorf("V = %d, want %d", got.V, SpecVersion)
		}
		if again := got.Encode(); again != label {
			t.Errorf("Encode is not stable:\n%s\n%s", label, again)
		}
	}
}

func TestSpecEncodeIsCanonical(t *testing.T) {
	// Specs built by hand (not through Container.Spec) encode in their
	// normal form too: lists in order, defaults filled.
	a := Spec{V: SpecVersion, Image: "x", Volumes: []string{"b:/b", "a:/a"}, Ports: []string{"2", "1"}}
	b := Spec{V: SpecVersion, Image: "x", Volumes: []string{"a:/a", "b:/b"}, Ports: []string{"1", "2"}, Restart: "unless-stopped"}
	if a.Encode() != b.Encode() {
		t.Errorf("Encode:\n%s\n%s", a.Encode(), b.Encode())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(a.Encode()), &m); err != nil {
		t.Fatal(err)
	}
	if m["restart"] != "unless-stopped" {
		t.Errorf("recorded restart = %v, want unless-stopped", m["restart"])
	}
}

// TestSpecFromOlderMeshctl is the upgrade rule (CONTRACT §5): a container
// recorded by an older meshctl, whose effective spec did not change, is not
// recreated.
func TestSpecFromOlderMeshctl(t *testing.T) {
	f, err := Decode("mesh.yaml", []byte("modules:\n  web:\n    containers:\n      box:\n        image: meshtest/busybox:1\n"))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Modules["web"].Containers["box"]
	want := c.Spec(c.Image)
	for _, label := range []string{
		`{"v":0,"image":"meshtest/busybox:1"}`,
		`{"image":"meshtest/busybox:1"}`,
		`{"v":0,"image":"meshtest/busybox:1","entrypoint":[],"env":{},"volumes":null,"labels":{}}`,
	} {
		have, err := DecodeSpec(label)
		if err != nil {
			t.Fatalf("DecodeSpec(%s): %v", label, err)
		}
		if d := Diff(have, want); len(d) != 0 {
			t.Errorf("older spec %s: Diff = %q, want none", label, d)
		}
	}
	// It still sees a real change.
	have, err := DecodeSpec(`{"v":0,"image":"meshtest/busybox:1","restart":"always"}`)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(have, want); !slices.Equal(d, []string{"restart"}) {
		t.Errorf("Diff = %q, want [restart]", d)
	}
}

func TestSpecFromNewerMeshctl(t *testing.T) {
	label := `{"v":9,"image":"meshtest/busybox:1","healthcheck":{"test":["CMD","true"]},"cpus":0.5,"env":{"A":"sha256:00"}}`
	got, err := DecodeSpec(label)
	if err != nil {
		t.Fatalf("DecodeSpec: %v", err)
	}
	want := Spec{V: 9, Image: "meshtest/busybox:1", Env: map[string]string{"A": "sha256:00"}, Restart: DefaultRestart}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeSpec = %+v, want %+v", got, want)
	}
}

func TestDecodeSpecRefusesGarbage(t *testing.T) {
	for _, label := range []string{"", "{", "not json", `{"image":1}`, `{"env":["A"]}`, `["x"]`} {
		if _, err := DecodeSpec(label); err == nil {
			t.Errorf("DecodeSpec(%q) accepted", label)
		}
	}
}

// TestEntrypointCleared follows "entrypoint: []" (clear the image's
// entrypoint) from the file to the recorded spec: at each step it stays apart
// from no entrypoint (the image's).
func TestEntrypointCleared(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		cleared   bool
	}{
		{"flow", "modules:\n  m:\n    containers:\n      c: {image: x, entrypoint: []}\n", true},
		{"block", "modules:\n  m:\n    containers:\n      c:\n        image: x\n        entrypoint: []\n", true},
		{"json", `{"modules": {"m": {"containers": {"c": {"image": "x", "entrypoint": []}}}}}`, true},
		{"absent", "modules:\n  m:\n    containers:\n      c: {image: x}\n", false},
		{"null", "modules:\n  m:\n    containers:\n      c: {image: x, entrypoint: null}\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Decode("mesh.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			check := func(step string, ep []string) {
				t.Helper()
				if cleared := ep != nil && len(ep) == 0; cleared != tt.cleared || !tt.cleared && ep != nil {
					t.Errorf("%s: entrypoint = %#v, want cleared=%v", step, ep, tt.cleared)
				}
			}
			c := f.Modules["m"].Containers["c"]
			check("decode", c.Entrypoint)

			// applied.json records the file as JSON.
			b, err := json.Marshal(f)
			if err != nil {
				t.Fatal(err)
			}
			var back File
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			check("file JSON round trip "+string(b), back.Modules["m"].Containers["c"].Entrypoint)

			s := c.Spec(c.Image)
			check("spec", s.Entrypoint)
			label := s.Encode()
			if got := strings.Contains(label, `"entrypoint":[]`); got != tt.cleared {
				t.Errorf("label %s: records an empty entrypoint = %v, want %v", label, got, tt.cleared)
			}
			have, err := DecodeSpec(label)
			if err != nil {
				t.Fatal(err)
			}
			check("recorded spec", have.Entrypoint)
			if d := Diff(have, s); len(d) != 0 {
				t.Errorf("Diff after round trip = %q", d)
			}
			// And the other way round is a change.
			other := *c
			if tt.cleared {
				other.Entrypoint = nil
			} else {
				other.Entrypoint = []string{}
			}
			if d := Diff(have, other.Spec(c.Image)); !slices.Equal(d, []string{"entrypoint"}) {
				t.Errorf("Diff(%s, other) = %q, want [entrypoint]", label, d)
			}
		})
	}
}

// TestEntrypointClearedFromOlderMeshctl: a version 1 spec recorded an empty
// entrypoint as none, so its none is no reason to recreate a container whose
// file says "entrypoint: []"; a real entrypoint still is.
func TestEntrypointClearedFromOlderMeshctl(t *testing.T) {
	want := (&Container{Image: "x", Entrypoint: []string{}}).Spec("x")
	for _, label := range []string{`{"v":1,"image":"x"}`, `{"v":1,"image":"x","entrypoint":[]}`, `{"image":"x"}`} {
		have, err := DecodeSpec(label)
		if err != nil {
			t.Fatal(err)
		}
		if d := Diff(have, want); len(d) != 0 {
			t.Errorf("Diff(%s, cleared) = %q, want none", label, d)
		}
	}
	have, err := DecodeSpec(`{"v":1,"image":"x","entrypoint":["/bin/sh"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(have, want); !slices.Equal(d, []string{"entrypoint"}) {
		t.Errorf("Diff = %q, want [entrypoint]", d)
	}
}
