package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// fuzzRun runs meshctl in-process with args and no stdin.
func fuzzRun(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	env := NewEnv(strings.NewReader(""), &out, &errb)
	code = Run(context.Background(), env, args)
	return code, out.String(), errb.String()
}

// FuzzConfigFile feeds any bytes to the config file: meshctl runs (exit 0)
// or refuses it with a message naming the file and exit 2; never a panic.
func FuzzConfigFile(f *testing.F) {
	for _, s := range []string{
		"state-dir: /tmp/x\nlock-timeout: 5s\noutput: json\n",
		"quiet: true\nverbose: true\n",
		"lock-timeout: forever\n",
		"output: xml\n",
		"nope: 1\n",
		"docker-host: unix:///nonexistent.sock\n",
		"state-dir: [a, b]\n",
		"{",
		"- a\n- b\n",
		"ledger: 'http://127.0.0.1:1'\nhost-name: h\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(cfg, data, 0o600); err != nil {
			t.Fatal(err)
		}
		code, _, stderr := fuzzRun("--config", cfg, "--state-dir", filepath.Join(dir, "state"), "version")
		switch code {
		case 0:
		case 2:
			if !strings.Contains(stderr, "meshctl: ") || strings.TrimSpace(stderr) == "meshctl:" {
				t.Fatalf("exit 2 without a message: %q", stderr)
			}
		default:
			t.Fatalf("config %q: exit %d: %s", data, code, stderr)
		}
	})
}

// FuzzBuildRecordArgs feeds any id and image reference to build record on
// a ledger that issued nothing: every such record is refused, with a
// message and exit 2 (a malformed id or reference, an unknown build).
func FuzzBuildRecordArgs(f *testing.F) {
	f.Add("b-01JNJ3Y3Z0000000000000000", "meshtest/busybox:1")
	f.Add("b-01JNJ3Y3Z0000000000000000", "UPPER:1")
	f.Add("p-01JNJ3Y3Z0000000000000000", "")
	f.Add("", "a@sha256:00")
	f.Add("--help", "-x")
	f.Add("b-\n", "a\x00b")
	f.Fuzz(func(t *testing.T, id, ref string) {
		dir := filepath.Join(t.TempDir(), "state")
		code, stdout, stderr := fuzzRun("--state-dir", dir, "build", "record", "--image="+ref, "--", id)
		if code != 2 {
			t.Fatalf("build record %q --image=%q: exit %d, want 2: %s%s", id, ref, code, stdout, stderr)
		}
		if !strings.HasPrefix(stderr, "meshctl: ") {
			t.Fatalf("no message on stderr: %q", stderr)
		}
	})
}

// FuzzMeshFile feeds any bytes to apply --dry-run -f FILE with no engine to
// reach: a file the decoder refuses is exit 2 with a message naming it, and
// nothing the decoder accepts reaches an engine that is not there with
// anything but exit 1 (unreachable) or 2 (an artifact: without a build).
func FuzzMeshFile(f *testing.F) {
	for _, s := range []string{
		"modules:\n  store:\n    containers:\n      registry: {image: meshtest/busybox:1}\n",
		"modules:\n  store:\n    containers:\n      registry: {artifact: store}\n",
		"modules: {}\n",
		"modules:\n  Bad: {}\n",
		"{\"modules\": {\"a\": {\"containers\": {\"b\": {\"image\": \"c\", \"nope\": 1}}}}}",
		"modules:\n  a:\n    containers:\n      b: {image: c}\n      b: {image: d}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		file := filepath.Join(dir, "mesh.yaml")
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, decodeErr := mesh.Decode(file, data)
		code, _, stderr := fuzzRun("--state-dir", filepath.Join(dir, "state"), "--docker-host", "unix://"+filepath.Join(dir, "no-engine.sock"),
			"--lock-timeout", "0", "apply", "--dry-run", "-f", file)
		switch {
		case decodeErr != nil && code != 2:
			t.Fatalf("refused by the decoder (%v), apply exits %d: %s", decodeErr, code, stderr)
		case decodeErr != nil && !strings.Contains(stderr, file):
			t.Fatalf("refusal does not name the file: %s", stderr)
		case decodeErr == nil && code != 1 && code != 2:
			t.Fatalf("accepted by the decoder, apply with no engine exits %d: %s", code, stderr)
		}
	})
}
