package mesh

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// runtimeRefusals are the decode and validation errors of secrets, configs
// and the runtime fields, each with the line it must blame.
func runtimeRefusals() []refusal {
	f := func(name, body, field, msg string) refusal {
		return refusal{name: name, src: base + body, field: fieldsBase + field, msg: msg}
	}
	return []refusal{
		f("secret without file", "        secrets:\n          - {name: pw} # <-\n", "secrets[0]", "file is missing"),
		f("secret bad name", "        secrets:\n          - {name: \"a b\", file: x} # <-\n", "secrets[0]", `"a b" is not a name`),
		f("secret named twice", "        secrets:\n          - {name: pw, file: x}\n          - {name: pw, file: y} # <-\n", "secrets[1]", `secret "pw" is named twice`),
		f("secret target with ..", "        secrets:\n          - {file: x, target: ../etc/passwd} # <-\n", "secrets[0]", `target "../etc/passwd": a path without ':', ',' or '..'`),
		f("secret target a colon", "        secrets:\n          - {file: x, target: \"/a:rw\"} # <-\n", "secrets[0]", `target "/a:rw"`),
		f("secret unknown key", "        secrets:\n          - {file: x, mode: 0400} # <-\n", "secrets[0].mode", `unknown field "mode"`),
		f("config relative target", "        configs:\n          - {file: x, target: etc/x} # <-\n", "configs[0]", `target "etc/x" is not an absolute path`),
		f("config and secret on one target", "        secrets:\n          - {file: a, target: /etc/x}\n        configs:\n          - {file: b, target: /etc/x} # <-\n", "configs[0]", "target /etc/x is also the target of secret a"),
		f("expose not a port", "        expose: [\"80\", http] # <-\n", "expose[1]", `"http" is not a port`),
		f("expose out of range", "        expose: [\"70000\"] # <-\n", "expose[0]", `"70000" is not a port`),
		f("expose bad range", "        expose: [\"90-80\"] # <-\n", "expose[0]", `"90-80" is not a port`),
		f("sysctl bad name", "        sysctls:\n          somaxconn: 1 # <-\n", "sysctls.somaxconn", `"somaxconn" is not a kernel parameter name`),
		f("ulimit unknown", "        ulimits:\n          files: 10 # <-\n", "ulimits.files", `"files" is not a limit the engine sets`),
		f("ulimit soft over hard", "        ulimits:\n          nofile: {soft: 20, hard: 10} # <-\n", "ulimits.nofile", "soft 20, hard 10"),
		f("ulimit unknown key", "        ulimits:\n          nofile: {soft: 20, hrad: 10} # <-\n", "ulimits.nofile.hrad", `unknown field "hrad"`),
		f("dns not an ip", "        dns: [one.one.one.one] # <-\n", "dns[0]", `"one.one.one.one" is not an IP address`),
		f("secret a name alone", "        secrets: [db_password] # <-\n", "secrets[0]", "want a map like {name: db_password, file: db_password.txt} (the file on the host itself), not a string"),
		f("secret target a volume's", "        volumes: [\"d:/run/secrets/pw\"]\n        secrets:\n          - {name: pw, file: x} # <-\n", "secrets[0]", "target /run/secrets/pw is also the target of volumes[0]"),
		f("container_name", "        container_name: web # <-\n", "container_name", `unknown field "container_name"; meshctl names every container MODULE.NAME`),
		f("platform", "        platform: linux/amd64 # <-\n", "platform", `unknown field "platform"; meshctl runs the image built for the host's platform: remove it`),
		f("runtime", "        runtime: runsc # <-\n", "runtime", `unknown field "runtime"; meshctl runs containers with the engine's default runtime`),
		f("privileged not a bool", "        privileged: [x] # <-\n", "privileged", ""),
	}
}

func TestDecodeRuntimeRefusals(t *testing.T) {
	for _, tt := range runtimeRefusals() {
		t.Run(tt.name, func(t *testing.T) {
			s := src(tt.src)
			_, err := Decode("mesh.yaml", []byte(s))
			checkRefusal(t, err, "mesh.yaml", markedLine(t, s), tt.field, tt.msg)
		})
	}
}

// TestDecodeRuntimeFields decodes secrets, configs and the runtime fields,
// and checks the canonical spec they make.
func TestDecodeRuntimeFields(t *testing.T) {
	f, err := Decode("mesh.yaml", []byte(src(`
modules:
  web:
    containers:
      app:
        image: meshtest/busybox:1
        secrets:
          - {name: db_pw, file: /srv/pw.txt}
          - {file: /srv/api.key, target: api}
        configs:
          - {file: /srv/app.conf}
          - {name: nginx, file: /srv/n.conf, target: /etc/nginx/nginx.conf}
        expose: [8080, "53/UDP", "9000-9002"]
        sysctls: {net.core.somaxconn: 1024}
        ulimits: {nofile: {soft: 1024, hard: 4096}, nproc: 512}
        privileged: true
        stdin-open: true
        tty: true
        dns: [198.18.0.53, 198.18.0.54]
`)))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Modules["web"].Containers["app"]
	s := c.Spec(c.Image).SpecFields
	want := SpecFields{
		Secrets: map[string]SpecFile{
			"db_pw":   {Target: "/run/secrets/db_pw", File: "/srv/pw.txt"},
			"api.key": {Target: "/run/secrets/api", File: "/srv/api.key"},
		},
		Configs: map[string]SpecFile{
			"app.conf": {Target: "/app.conf", File: "/srv/app.conf"},
			"nginx":    {Target: "/etc/nginx/nginx.conf", File: "/srv/n.conf"},
		},
		Expose:     []string{"53/udp", "8080/tcp", "9000-9002/tcp"},
		Sysctls:    map[string]string{"net.core.somaxconn": "1024"},
		Ulimits:    map[string]Ulimit{"nofile": {1024, 4096}, "nproc": {512, 512}},
		Privileged: true, StdinOpen: true, TTY: true,
		DNS: []string{"198.18.0.53", "198.18.0.54"},
	}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("SpecFields =\n%+v\nwant\n%+v", s, want)
	}
	if p := c.Secrets[1].TargetPath(KindSecret); p != "/run/secrets/api" {
		t.Errorf("TargetPath = %q", p)
	}
}

// TestDiffNamesRuntimeFields changes one field at a time: the reason names
// it, and a secret by its name.
func TestDiffNamesRuntimeFields(t *testing.T) {
	for _, tt := range []struct {
		field string
		set   func(c *Container)
	}{
		{"secrets.pw", func(c *Container) { c.Secrets = []FileMount{{Name: "pw", File: "/pw"}} }},
		{"configs.app.conf", func(c *Container) { c.Configs = []FileMount{{File: "/etc/app.conf"}} }},
		{"expose", func(c *Container) { c.Expose = []string{"80"} }},
		{"sysctls", func(c *Container) { c.Sysctls = map[string]string{"net.core.somaxconn": "1"} }},
		{"ulimits", func(c *Container) { c.Ulimits = map[string]Ulimit{"nofile": {1, 1}} }},
		{"privileged", func(c *Container) { c.Privileged = true }},
		{"stdin-open", func(c *Container) { c.StdinOpen = true }},
		{"tty", func(c *Container) { c.TTY = true }},
		{"dns", func(c *Container) { c.DNS = []string{"198.18.0.53"} }},
	} {
		old := Container{Image: "x"}
		c := Container{Image: "x"}
		tt.set(&c)
		if d := Diff(old.Spec("x"), c.Spec("x")); !slices.Equal(d, []string{tt.field}) {
			t.Errorf("%s: Diff = %q", tt.field, d)
		}
	}
	// DNS servers are asked in order: another order is another container.
	a, b := Container{Image: "x"}, Container{Image: "x"}
	a.DNS, b.DNS = []string{"198.18.0.1", "198.18.0.2"}, []string{"198.18.0.2", "198.18.0.1"}
	if d := Diff(a.Spec("x"), b.Spec("x")); !slices.Equal(d, []string{"dns"}) {
		t.Errorf("dns order: Diff = %q", d)
	}
}

// TestSpecV3WithoutRuntimeFields is the upgrade rule for secrets, configs
// and the runtime fields: a container that sets none of them encodes exactly as before
// they existed, so a host applied before is not recreated.
func TestSpecV3WithoutRuntimeFields(t *testing.T) {
	c := Container{Image: "meshtest/busybox:1", Command: []string{"sleep", "600"}}
	c.ReadOnly, c.ExtraHosts = true, []string{"db:198.18.0.2"}
	recorded := `{"v":3,"image":"meshtest/busybox:1","command":["sleep","600"],"restart":"unless-stopped","read_only":true,"extra_hosts":["db:198.18.0.2"]}`
	if got := c.Spec(c.Image).Encode(); got != recorded {
		t.Errorf("Encode =\n%s\nwant\n%s", got, recorded)
	}
	have, err := DecodeSpec(recorded)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(have, c.Spec(c.Image)); len(d) != 0 {
		t.Errorf("Diff = %q, want none", d)
	}
}

// TestLoadFilesHashesKeyed: the recorded hash of a secret is keyed: the
// same content under another host's key differs, it is not the content's
// plain sha256, and a changed content changes it.
func TestLoadFilesHashesKeyed(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "pw.txt")
	content := "hunter2\n"
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Container{Image: "x"}
	c.Secrets = []FileMount{{Name: "pw", File: p}}
	hash := func(key string) string {
		t.Helper()
		out, warnings, err := c.LoadFiles("m.c", []byte(key))
		if err != nil || len(warnings) > 0 {
			t.Fatalf("LoadFiles: %v %q", err, warnings)
		}
		return out.Spec("x").Secrets["pw"].Hash
	}
	a, b := hash("host-a-key-0123456789"), hash("host-b-key-0123456789")
	sum := sha256.Sum256([]byte(content))
	switch {
	case !strings.HasPrefix(a, "hmac-sha256:") || len(a) != len("hmac-sha256:")+64:
		t.Errorf("hash %q, want hmac-sha256:HEX", a)
	case a == b:
		t.Errorf("two keys make the same hash %s", a)
	case strings.Contains(a, hex.EncodeToString(sum[:])):
		t.Errorf("hash %s is the content's plain sha256", a)
	case hash("host-a-key-0123456789") != a:
		t.Errorf("the same key and content make another hash")
	}
	if err := os.WriteFile(p, []byte("hunter3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if hash("host-a-key-0123456789") == a {
		t.Errorf("a changed content keeps its hash")
	}
	if c.Secrets[0].hash != "" {
		t.Errorf("LoadFiles changed the container it was called on")
	}
}

// TestLoadFilesErrorsAndWarnings: a missing or unreadable file fails with
// its container, name and path, never its content; a secret other users
// can read is warned about by path; a group-readable one (how a container
// user of the file's group reads it) and a world-readable config are not.
func TestLoadFilesErrorsAndWarnings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	key := []byte("key-0123456789abcdef")
	open := write("open.txt", "CANARY-open", 0o644)
	group := write("group.txt", "CANARY-group", 0o640)
	conf := write("app.conf", "listen 80", 0o644)
	c := Container{Image: "x"}
	c.Secrets = []FileMount{{File: open}, {File: group}}
	c.Configs = []FileMount{{File: conf}}
	_, warnings, err := c.LoadFiles("m.c", key)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], open+" can be read or changed by other users (mode 0644)") {
		t.Errorf("warnings = %q, want one for %s", warnings, open)
	}
	if os.Geteuid() == 0 {
		// Owned by another user: that user can change it.
		other := write("other.txt", "CANARY-other", 0o600)
		if err := os.Chown(other, 4242, 4242); err != nil {
			t.Fatal(err)
		}
		c := Container{Image: "x"}
		c.Secrets = []FileMount{{File: other}}
		if _, warnings, err := c.LoadFiles("m.c", key); err != nil || len(warnings) != 1 ||
			!strings.Contains(warnings[0], other+" is owned by another user (uid 4242)") {
			t.Errorf("a file of uid 4242: warnings %q, %v", warnings, err)
		}
	}
	for _, tt := range []struct {
		name  string
		mount FileMount
		want  string
	}{
		{"missing", FileMount{Name: "pw", File: filepath.Join(dir, "gone")}, "container m.c: secret pw: file " + filepath.Join(dir, "gone") + " cannot open: no such file or directory"},
		{"a directory", FileMount{Name: "pw", File: dir}, "is not a regular file (a directory)"},
		{"too large", FileMount{Name: "pw", File: write("big", "CANARY"+strings.Repeat("x", MaxSecretFileSize), 0o600)}, "is larger than 1 MiB"},
	} {
		c := Container{Image: "x"}
		c.Secrets = []FileMount{tt.mount}
		_, _, err := c.LoadFiles("m.c", key)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "CANARY") {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, _, err := c.LoadFiles("m.c", nil); err == nil {
		t.Errorf("LoadFiles without a key hashed the files")
	}
}
