package mesh

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func FuzzDecode(f *testing.F) {
	files, err := filepath.Glob("testdata/*.*")
	if err != nil {
		f.Fatal(err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, r := range refusals() {
		f.Add([]byte(src(r.src)))
	}
	for _, r := range runtimeRefusals() {
		f.Add([]byte(src(r.src)))
	}
	for _, r := range networkRefusals() {
		f.Add([]byte(src(r.src)))
	}
	for _, c := range syntaxCases() {
		f.Add([]byte(src(c.src)))
	}
	f.Add([]byte(src(`
modules:
  web:
    containers:
      app:
        image: x
        secrets: [{name: pw, file: pw.txt}, {file: k, target: /etc/k}]
        configs: [{file: a.conf}]
        ulimits: {nofile: {soft: 1, hard: 2}, nproc: 3}
        sysctls: {net.core.somaxconn: 1}
        expose: [80, 53/udp, "1-2"]
        dns: [198.18.0.1]
        privileged: true
        stdin-open: true
        tty: true
`)))
	f.Add([]byte(src(`
modules:
  shop:
    networks: {default: {}, back: {internal: true}, edge: {external: proxy}}
    containers:
      db: {image: x, networks: {back: {aliases: [&a database]}, default: ~}}
      api: {image: x, networks: [default, back, edge, other/net]}
      web: {image: x, networks: {default: {aliases: [*a]}}}
`)))
	f.Add([]byte(src(`
modules:
  store:
    containers:
      registry: {image: x, volumes: [&v "a:/a"], ports: ["80"]}
      cache: {artifact: store, env: {A: 1, B: ~}}
    steps:
      gc: {while-stopped: [registry, cache], timeout: 1m, run: {volumes-from: [cache], volumes: [*v]}}
      sh: {exec: [/bin/sh], while-stopped: [cache]}
  <<: {web: {containers: {a: {image: b}}}}
`)))
	for _, a := range adversarials() {
		f.Add(a.file(4 << 10))
	}
	// Two of 256 KiB, large enough for checkDecodeTime to see work that
	// grows faster than the file: the reported file's label keys (yaml.v3's own
	// duplicate-key check spent over a second on them), and aliases of a
	// map (decoded again at each alias: 400ms before MaxRepeated).
	f.Add(adversarials()[0].file(256 << 10))
	f.Add(adversarials()[len(adversarials())-1].file(256 << 10))
	f.Fuzz(func(t *testing.T, data []byte) {
		start := cpuTime()
		file, err := Decode("fuzz.yaml", data)
		checkDecodeTime(t, cpuTime()-start, len(data))
		if err != nil {
			de, ok := err.(*DecodeError)
			if !ok {
				t.Fatalf("error is %T, want *DecodeError: %v", err, err)
			}
			if de.File != "fuzz.yaml" || !strings.HasPrefix(de.Error(), "fuzz.yaml") {
				t.Errorf("error does not name the file: %v", err)
			}
			if de.Line < 0 || de.Line > lineCount(data) {
				t.Errorf("error at line %d of a file of %d lines: %v", de.Line, lineCount(data), err)
			}
			return
		}
		if file == nil || file.Modules == nil {
			t.Fatalf("Decode = %+v, nil error", file)
		}
		for mn, m := range file.Modules {
			if !ValidName(mn) {
				t.Errorf("module name %q", mn)
			}
			if m == nil {
				t.Fatalf("module %q is nil", mn)
			}
			for cn, c := range m.Containers {
				if !ValidName(cn) {
					t.Errorf("container name %q", cn)
				}
				if c == nil || (c.Image == "") == (c.Artifact == "") {
					t.Errorf("container %s.%s: want exactly one of image and artifact: %+v", mn, cn, c)
				}
			}
			for sn, s := range m.Steps {
				if !ValidName(sn) {
					t.Errorf("step name %q", sn)
				}
				if s == nil {
					t.Fatalf("step %s/%s is nil", mn, sn)
				}
				for _, cn := range s.WhileStopped {
					if _, ok := m.Containers[cn]; !ok {
						t.Errorf("step %s/%s holds %q, not a container of %s", mn, sn, cn, mn)
					}
				}
				if (s.Run == nil) == (len(s.Exec) == 0) {
					t.Errorf("step %s/%s: want exactly one of run and exec", mn, sn)
				}
				if s.TimeoutOrDefault() <= 0 {
					t.Errorf("step %s/%s: timeout %v", mn, sn, s.TimeoutOrDefault())
				}
			}
		}
	})
}

// checkDecodeTime fails a decode of size bytes that took more than
// 500ms a megabyte of CPU time, and more than 200ms: decoding must stay
// linear in the file (yaml.v3's duplicate-key check once took 55s for
// 2 MB). CPU time, not the clock's: a busy machine does not make it grow.
// The bound is generous: a mesh file decodes at 2 to 10 MB a second.
func checkDecodeTime(t *testing.T, cpu time.Duration, size int) {
	t.Helper()
	perMB := time.Duration(float64(cpu) / (float64(max(size, 1)) / 1e6))
	if cpu > 200*time.Millisecond && perMB > 500*time.Millisecond {
		t.Errorf("decoding %d bytes took %v of CPU time, %v a megabyte: want at most 500ms a megabyte", size, cpu, perMB)
	}
}

// lineCount is the number of lines of data as YAML counts them, plus one for
// an error at the end of the last line.
func lineCount(data []byte) int {
	n := 1 + bytes.Count(data, []byte("\n"))
	n += bytes.Count(data, []byte("\r")) // a lone CR breaks a line too
	for _, r := range []rune{'\u0085', '\u2028', '\u2029'} {
		n += bytes.Count(data, []byte(string(r)))
	}
	return n + 1
}

func FuzzDecodeSpec(f *testing.F) {
	f.Add(registry().Spec("meshtest/registry:1").Encode(), "meshtest/registry:1", "A", "value", "a:/a")
	f.Add(`{"v":0,"image":"meshtest/busybox:1"}`, "x", "", "", "")
	f.Add(`{"v":9,"image":"x","healthcheck":{"test":["CMD"]},"ports":["2","1"],"volumes":["b:/b","a:/a"]}`, "x", "B", "", "/a:/b:ro")
	f.Add(`{"restart":"","env":{},"labels":{"io.x":"y"}}`, "", "A=B", "\x00", "")
	f.Add(`{"v":3,"image":"x","secrets":{"pw":{"target":"/run/secrets/pw","file":"/pw","hash":"hmac-sha256:00"}},"expose":["80/TCP","80/tcp"],"ulimits":{"nofile":{"soft":1,"hard":2}},"dns":["b","a"],"tty":true}`, "x", "K", "v", "v")
	f.Add(`null`, "x", "K", "v", "v")
	f.Add(`{`, "x", "K", "v", "v")
	f.Fuzz(func(t *testing.T, label, image, envKey, envValue, volume string) {
		if s, err := DecodeSpec(label); err == nil {
			roundTrip(t, s)
		}
		if !utf8.ValidString(image) || !utf8.ValidString(envKey) || !utf8.ValidString(volume) {
			// A mesh file is UTF-8 (yaml.v3 refuses anything else), and
			// so is every string of the spec of one of its containers.
			return
		}
		c := &Container{
			Image:   image,
			Env:     map[string]string{envKey: envValue},
			Volumes: []string{volume, "a:/a"},
			Ports:   []string{volume},
			Labels:  map[string]string{envKey: image},
		}
		s := c.Spec(image)
		if strings.Contains(s.Encode(), fmt.Sprintf("%q", envValue)) && envValue != envKey && envValue != image && envValue != volume && len(envValue) > 8 {
			t.Errorf("Encode() holds the env value %q: %s", envValue, s.Encode())
		}
		roundTrip(t, s)
	})
}

func roundTrip(t *testing.T, s Spec) {
	t.Helper()
	label := s.Encode()
	got, err := DecodeSpec(label)
	if err != nil {
		t.Fatalf("DecodeSpec(%s): %v", label, err)
	}
	if d := Diff(s, got); len(d) != 0 {
		t.Errorf("DecodeSpec(Encode(%+v)) differs in %q", s, d)
	}
	if again := got.Encode(); again != label {
		t.Errorf("Encode after a round trip:\n%s\n%s", label, again)
	}
}

// benchFile is a mesh file of modules × containers, each with every field.
func benchFile(modules, containers int) []byte {
	var b strings.Builder
	b.WriteString("modules:\n")
	for m := range modules {
		fmt.Fprintf(&b, "  module-%03d:\n    containers:\n", m)
		for c := range containers {
			fmt.Fprintf(&b, `      container-%d:
        image: meshtest/app-%d:%d
        entrypoint: [/bin/app]
        command: [serve, --port, "%d"]
        env: {APP_ADDR: "127.0.0.1:%d", APP_MODE: production, APP_SECRET: "hunter%d"}
        volumes: ["data-%d-%d:/var/lib/app", "/srv/conf:/etc/app:ro"]
        network: bridge
        ports: ["127.0.0.1:%d:8080"]
        restart: unless-stopped
        labels: {team: infra, module: module-%03d}
`, c, m, c, 8000+c, 8000+c, c, m, c, 10000+m*containers+c, m)
		}
		b.WriteString("    steps:\n      backup:\n        while-stopped: [container-0]\n        timeout: 30m\n        run: {command: [backup]}\n")
	}
	return []byte(b.String())
}

func BenchmarkDecode(b *testing.B) {
	data := benchFile(100, 5)
	f, err := Decode("bench.yaml", data)
	if err != nil {
		b.Fatal(err)
	}
	if len(f.Modules) != 100 || len(f.Modules["module-099"].Containers) != 5 {
		b.Fatalf("decoded %d modules", len(f.Modules))
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode("bench.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
