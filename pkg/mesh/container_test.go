package mesh

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

const fieldsBase = "modules.store.containers.registry."

// fieldRefusals are the container fields' decode and validation errors,
// each with the line it must blame.
func fieldRefusals() []refusal {
	f := func(name, body, field, msg string) refusal {
		return refusal{name: name, src: base + body, field: fieldsBase + field, msg: msg}
	}
	return []refusal{
		f("healthcheck not a map", "        healthcheck: yes # <-\n", "healthcheck", "" /* a type error: its wording is decode.go's */),
		f("healthcheck unknown key", "        healthcheck:\n          test: [CMD, 'true']\n          intervall: 1s # <-\n", "healthcheck.intervall", `unknown field "intervall"`),
		f("healthcheck without test", "        healthcheck: # <-\n          interval: 1s\n", "healthcheck", "test is missing"),
		f("healthcheck bad kind", "        healthcheck:\n          test: [RUN, x] # <-\n", "healthcheck.test", `"RUN" is not CMD, CMD-SHELL or NONE`),
		f("healthcheck CMD alone", "        healthcheck:\n          test: [CMD] # <-\n", "healthcheck.test", "CMD needs a command"),
		f("healthcheck NONE with a command", "        healthcheck:\n          test: [NONE, x] # <-\n", "healthcheck.test", "NONE takes no command"),
		f("healthcheck disable and test", "        healthcheck:\n          test: [CMD, x]\n          disable: true # <-\n", "healthcheck.disable", "either disable or test"),
		f("healthcheck bad interval", "        healthcheck:\n          test: [CMD, x]\n          interval: soon # <-\n", "healthcheck.interval", `invalid duration "soon"`),
		f("healthcheck zero timeout", "        healthcheck:\n          test: [CMD, x]\n          timeout: 0s # <-\n", "healthcheck.timeout", "must be positive"),
		f("healthcheck negative retries", "        healthcheck:\n          test: [CMD, x]\n          retries: -1 # <-\n", "healthcheck.retries", "must not be negative"),
		f("healthcheck retries not a number", "        healthcheck:\n          test: [CMD, x]\n          retries: many # <-\n", "healthcheck.retries", "" /* a type error: its wording is decode.go's */),
		f("healthcheck bad start-period", "        healthcheck:\n          test: [CMD, x]\n          start-period: 5 # <-\n", "healthcheck.start-period", `invalid duration "5"`),
		f("stop-signal unknown", "        stop-signal: SIGFOO # <-\n", "stop-signal", `"SIGFOO" is not a signal`),
		f("stop-signal out of range", "        stop-signal: 99 # <-\n", "stop-signal", `"99" is not a signal`),
		f("stop-grace-period bad", "        stop-grace-period: 10 # <-\n", "stop-grace-period", `invalid duration "10"`),
		f("user with a space", "        user: \"a b\" # <-\n", "user", `"a b" is not a user`),
		f("working-dir relative", "        working-dir: app # <-\n", "working-dir", `"app" is not an absolute path`),
		f("hostname bad", "        hostname: -web # <-\n", "hostname", `"-web" is not a host name`),
		f("init not a bool", "        init: [x] # <-\n", "init", "" /* a type error: its wording is decode.go's */),
		f("read-only not a bool", "        read-only: {a: b} # <-\n", "read-only", "" /* a type error: its wording is decode.go's */),
		f("tmpfs relative", "        tmpfs:\n          - /run\n          - tmp # <-\n", "tmpfs[1]", `"tmp": use /path`),
		f("tmpfs not a list", "        tmpfs: {a: b} # <-\n", "tmpfs", "" /* a type error: its wording is decode.go's */),
		f("cap-add bad", "        cap-add: [NET_ADMIN, net admin] # <-\n", "cap-add[1]", `"net admin" is not a capability`),
		f("cap-drop bad", "        cap-drop:\n          - \"1x\" # <-\n", "cap-drop[0]", `"1x" is not a capability`),
		f("memory bad", "        memory: lots # <-\n", "memory", `"lots" is not a size`),
		f("memory too small", "        memory: 1m # <-\n", "memory", "below the engine's minimum of 6m"),
		f("cpus negative", "        cpus: -1 # <-\n", "cpus", "-1 is not a CPU count"),
		f("cpus not a number", "        cpus: half # <-\n", "cpus", "" /* a type error: its wording is decode.go's */),
		f("pids-limit negative", "        pids-limit: -5 # <-\n", "pids-limit", "-5 is not a limit"),
		f("logging options without driver", "        logging: # <-\n          options: {max-size: 10m}\n", "logging", "driver is missing: options need a driver"),
		f("logging bad driver", "        logging:\n          driver: \"json file\" # <-\n", "logging.driver", `"json file" is not a log driver name`),
		f("logging unknown key", "        logging:\n          drivr: local # <-\n", "logging.drivr", `unknown field "drivr"`),
		f("extra-hosts without ip", "        extra-hosts: [db] # <-\n", "extra-hosts[0]", `"db": use HOST:IP`),
		f("extra-hosts bad ip", "        extra-hosts:\n          - \"db:10.0.0\" # <-\n", "extra-hosts[0]", `"10.0.0" is not an IP address`),
		f("env-file empty", "        env-file: [\"\"] # <-\n", "env-file[0]", "is empty"),
		f("env-file not strings", "        env-file: {a: b} # <-\n", "env-file", "" /* a type error: its wording is decode.go's */),
		f("depends-on bad name", "        depends-on: [Web] # <-\n", "depends-on[0]", `"Web" is not a container name`),
		f("depends-on itself", "        depends-on: [registry] # <-\n", "depends-on[0]", "is the container itself"),
		f("depends-on unknown", "        depends-on: [registri] # <-\n", "depends-on[0]", `unknown container "registri" (module store has: registry); did you mean "registry"?`),
		f("depends-on unknown in another module", "        depends-on: [other.x] # <-\n  other:\n    containers:\n      y: {image: x}\n", "depends-on[0]", `unknown container "other.x"`),
		f("depends-on twice", "        depends-on: [b, b] # <-\n      b: {image: x}\n", "depends-on[1]", "listed twice"),
		{name: "depends-on cycle", src: `
modules:
  store:
    containers:
      a:
        image: x
        depends-on: [b] # <-
      b:
        image: x
        depends-on: [c]
      c:
        image: x
        depends-on: [a]
`, field: "modules.store.containers.a.depends-on", msg: "dependency cycle: store.a → store.b → store.c → store.a"},
		{name: "depends-on cycle across modules", src: `
modules:
  db:
    containers:
      pg:
        image: x
        depends-on: [web.app] # <-
  web:
    containers:
      app:
        image: x
        depends-on: [db.pg]
`, field: "modules.db.containers.pg.depends-on", msg: "dependency cycle: db.pg → web.app → db.pg"},
	}
}

func TestDecodeFieldRefusals(t *testing.T) {
	for _, tt := range fieldRefusals() {
		t.Run(tt.name, func(t *testing.T) {
			s := src(tt.src)
			_, err := Decode("mesh.yaml", []byte(s))
			checkRefusal(t, err, "mesh.yaml", markedLine(t, s), tt.field, tt.msg)
		})
	}
}

// TestDecodeFields decodes every field and checks the canonical spec they
// make.
func TestDecodeFields(t *testing.T) {
	f, err := Decode("mesh.yaml", []byte(src(`
modules:
  web:
    containers:
      db: {image: x}
      app:
        image: meshtest/busybox:1
        healthcheck:
          test: wget -q -O- http://127.0.0.1:8080/
          interval: 2s
          start-period: 5s
        depends-on: [db, other.cache]
        stop-signal: quit
        stop-grace-period: 30s
        user: "1000:1000"
        working-dir: /srv
        hostname: app.local
        init: true
        read-only: true
        tmpfs: [/tmp, "/run:size=64m"]
        cap-add: [net_admin]
        cap-drop: [ALL]
        memory: 512m
        cpus: 0.5
        pids-limit: 100
        logging: {driver: local, options: {max-size: 10m}}
        extra-hosts: ["db=10.0.0.2", "cache:10.0.0.3"]
        env-file: app.env
`)))
	if err != nil {
		t.Fatal(err)
	}
	c := f.Modules["web"].Containers["app"]
	if got := c.Dependencies("web"); !slices.Equal(got, []string{"web.db", "other.cache"}) {
		t.Errorf("Dependencies = %q", got)
	}
	if !slices.Equal(c.EnvFile, []string{"app.env"}) {
		t.Errorf("EnvFile = %q", c.EnvFile)
	}
	s := c.Spec(c.Image)
	want := SpecFields{
		Health: &SpecHealth{Test: []string{"CMD-SHELL", "wget -q -O- http://127.0.0.1:8080/"}, Interval: 2 * time.Second,
			Timeout: DefaultHealthTimeout, Retries: DefaultHealthRetries, StartPeriod: 5 * time.Second},
		StopSignal: "SIGQUIT", StopGracePeriod: 30 * time.Second, User: "1000:1000", WorkingDir: "/srv",
		Hostname: "app.local", Init: true, ReadOnly: true, Tmpfs: []string{"/run:size=64m", "/tmp"},
		CapAdd: []string{"CAP_NET_ADMIN"}, CapDrop: []string{"ALL"}, Memory: 512 << 20, NanoCPUs: 5e8,
		PidsLimit: 100, LogDriver: "local", LogOptions: map[string]string{"max-size": "10m"},
		ExtraHosts: []string{"cache:10.0.0.3", "db:10.0.0.2"},
	}
	if !reflect.DeepEqual(s.SpecFields, want) {
		t.Errorf("SpecFields =\n%+v\nwant\n%+v", s.SpecFields, want)
	}
	// The recorded form reads back equal.
	back, err := DecodeSpec(s.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(back, s); len(d) != 0 {
		t.Errorf("round trip differs in %q", d)
	}
}

// TestDiffNamesEachField changes one field at a time: the reason names it.
func TestDiffNamesEachField(t *testing.T) {
	hc := &Healthcheck{Test: HealthTest{"CMD", "true"}}
	for _, tt := range []struct {
		field string
		set   func(c *Container)
	}{
		{"healthcheck", func(c *Container) { c.Healthcheck = hc }},
		{"stop-signal", func(c *Container) { c.StopSignal = "SIGINT" }},
		{"stop-grace-period", func(c *Container) { c.StopGracePeriod = Duration(time.Minute) }},
		{"user", func(c *Container) { c.User = "nobody" }},
		{"working-dir", func(c *Container) { c.WorkingDir = "/x" }},
		{"hostname", func(c *Container) { c.Hostname = "h" }},
		{"init", func(c *Container) { c.Init = true }},
		{"read-only", func(c *Container) { c.ReadOnly = true }},
		{"tmpfs", func(c *Container) { c.Tmpfs = []string{"/tmp"} }},
		{"cap-add", func(c *Container) { c.CapAdd = []string{"NET_ADMIN"} }},
		{"cap-drop", func(c *Container) { c.CapDrop = []string{"ALL"} }},
		{"memory", func(c *Container) { c.Memory = "64m" }},
		{"cpus", func(c *Container) { c.CPUs = 1.5 }},
		{"pids-limit", func(c *Container) { c.PidsLimit = 10 }},
		{"logging", func(c *Container) { c.Logging = &Logging{Driver: "local"} }},
		{"extra-hosts", func(c *Container) { c.ExtraHosts = []string{"a:1.2.3.4"} }},
		{"env.A", func(c *Container) { c.Env = map[string]string{"A": "1"} }},
	} {
		old := Container{Image: "x"}
		c := Container{Image: "x"}
		tt.set(&c)
		if d := Diff(old.Spec("x"), c.Spec("x")); !slices.Equal(d, []string{tt.field}) {
			t.Errorf("%s: Diff = %q", tt.field, d)
		}
	}
}

// TestFieldDefaultsAreNoChange writes every default explicitly: it is the
// same container as one that leaves them out.
func TestFieldDefaultsAreNoChange(t *testing.T) {
	plain := Container{Image: "x"}
	plain.Healthcheck = &Healthcheck{Test: HealthTest{"CMD", "true"}}
	explicit := Container{Image: "x"}
	explicit.Healthcheck = &Healthcheck{Test: HealthTest{"CMD", "true"},
		Interval: Duration(30 * time.Second), Timeout: Duration(30 * time.Second), Retries: 3}
	explicit.StopSignal, explicit.StopGracePeriod = "TERM", Duration(10*time.Second)
	if d := Diff(plain.Spec("x"), explicit.Spec("x")); len(d) != 0 {
		t.Errorf("Diff = %q, want none", d)
	}
}

// TestSpecV2ReadsAsDefaults is the upgrade rule: a spec recorded by the
// meshctl before the container fields (version 2) is no change for a
// container that sets none of them.
func TestSpecV2ReadsAsDefaults(t *testing.T) {
	c := Container{Image: "meshtest/busybox:1", Command: []string{"sleep", "600"}, Restart: "always"}
	old := `{"v":2,"image":"meshtest/busybox:1","command":["sleep","600"],"restart":"always"}`
	have, err := DecodeSpec(old)
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(have, c.Spec(c.Image)); len(d) != 0 {
		t.Errorf("Diff = %q, want none", d)
	}
	c.ReadOnly = true
	if d := Diff(have, c.Spec(c.Image)); !slices.Equal(d, []string{"read-only"}) {
		t.Errorf("Diff = %q, want [read-only]", d)
	}
}
