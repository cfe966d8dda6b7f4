package harness

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/internal/meshrun"
)

// The canaries: secret values, one per way a secret reaches meshctl, so
// that a leak says which way it came. Each contains canaryMark.
const (
	canaryMark       = "CANARY"
	canaryEnv        = "CANARY-env-4f1d"      // a container's env:
	canaryEnvFile    = "CANARY-envfile-9b2e"  // a line of a container's env-file:
	canaryRunEnv     = "CANARY-runenv-77c3"   // a run: step's env:
	canaryProcess    = "CANARY-process-0a5b"  // meshctl's own environment (a CI job's token)
	canaryLedgerPass = "CANARY-ledgerpw-3e8f" // MESHCTL_LEDGER_PASSWORD
	canarySecret     = "CANARY-secret-5d21"   // a container's secrets: file
)

// canaryMesh names every secret a file can hold. Its containers and steps
// print nothing of their environment: what the canary check looks for is
// meshctl's own leaks, not a step that prints its secrets on purpose.
const canaryMesh = `modules:
  MODULE:
    containers:
      app:
        image: meshtest/busybox:1
        command: [sh, -c, "trap 'exit 0' TERM; sleep 3600 & wait"]
        env: {DB_PASSWORD: "CANARY-env-4f1d"}
        env-file: [secret.env]
        secrets: [{name: db_pw, file: db_pw.txt}]
        network: none
    steps:
      showenv:
        while-stopped: [app]
        exec: [env]
      sweep:
        while-stopped: [app]
        run:
          env: {SWEEP_TOKEN: "CANARY-runenv-77c3"}
          command: [echo, swept]
      fails:
        exec: [/bin/sh, -c, "echo failing; exit 4"]
`

// canaryFailMesh changes the container so that its new version fails (it
// exits at once): the apply fails, puts the old one back, and reports
// the new one's log.
const canaryFailMesh = `modules:
  MODULE:
    containers:
      app:
        image: meshtest/busybox:1
        command: [sh, -c, "echo starting; exit 3"]
        env: {DB_PASSWORD: "CANARY-env-4f1d", OTHER: "CANARY-env-4f1d-2"}
        env-file: [secret.env]
        secrets: [{name: db_pw, file: db_pw.txt}]
        network: none
`

// canaryPullMesh names an image that cannot be had.
const canaryPullMesh = `modules:
  MODULE:
    containers:
      app:
        image: 127.0.0.1:1/meshtest/none:1
        env: {DB_PASSWORD: "CANARY-env-4f1d"}
        env-file: [secret.env]
        secrets: [{name: db_pw, file: db_pw.txt}]
        network: none
`

// TestCanary: secrets placed in a container's env and
// env-file, a run: step's env, meshctl's own environment and the ledger
// password appear in no output of any command — success and failure, text
// and -o json, --dry-run, -v, status and status --check, window run, logs
// and list, the build commands — nor in the metrics file (--metrics-file)
// any of them wrote, and in no file of the state directory,
// except applied.json (the desired state, which has env: as written), which
// stays 0600 in a 0700 directory. The content of a secrets: file
// is in no file at all, applied.json included, nor on the container's
// labels.
func TestCanary(t *testing.T) {
	host := meshrun.TestEngine(t)
	m := newMeshctl(t, host)
	metricsFile := filepath.Join(m.Dir, "meshctl.prom")
	m.Env = append(m.Env, "MESHCTL_LEDGER_USER=canary", "MESHCTL_LEDGER_PASSWORD="+canaryLedgerPass,
		"CI_JOB_TOKEN="+canaryProcess, "MESHCTL_METRICS_FILE="+metricsFile)
	module := fmt.Sprintf("cny%08x", rand.Uint32())
	m.CleanupModule(module)
	write := func(name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(m.Dir, name), []byte(strings.ReplaceAll(text, "MODULE", module)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("mesh.yaml", canaryMesh)
	write("fail.yaml", canaryFailMesh)
	write("pull.yaml", canaryPullMesh)
	write("secret.env", "# a secret\nAPI_KEY="+canaryEnvFile+"\nexport QUOTED=\""+canaryEnvFile+"-q\"\n")
	write("db_pw.txt", canarySecret+"\n")

	var outputs []string
	run := func(wantFail bool, args ...string) string {
		t.Helper()
		stdout, stderr, err := m.Run2(args...)
		if (err != nil) != wantFail {
			t.Fatalf("meshctl %s: %v (want failure: %v)\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, wantFail, stdout, stderr)
		}
		out := "$ meshctl " + strings.Join(args, " ") + "\n" + stdout + stderr
		// The metrics file is written whole after most commands: what
		// each wrote is searched, not only the last.
		if prom, err := os.ReadFile(metricsFile); err == nil {
			out += "\n" + metricsFile + " after it:\n" + string(prom)
		}
		outputs = append(outputs, out)
		return stdout
	}

	// Success, text and JSON, a dry run and debug logs.
	run(false, "apply", "-f", "mesh.yaml")
	run(false, "apply", "-f", "mesh.yaml", "-o", "json")
	run(false, "apply", "--dry-run", "-f", "mesh.yaml")
	run(false, "apply", "--dry-run", "-f", "mesh.yaml", "-o", "json")
	run(false, "-v", "apply", "-f", "mesh.yaml")
	run(false, "apply", "--last", "-o", "json")
	run(false, "status")
	run(false, "status", "-o", "json")
	run(false, "status", "--check")
	for k, v := range m.inspect(module + ".app").Labels {
		if strings.Contains(v, canaryMark) {
			t.Errorf("a secret is on the container's label %s: %s", k, v)
		}
		if k == "io.meshctl.spec" && !strings.Contains(v, `"db_pw":{`) {
			t.Errorf("the recorded spec has no secret db_pw: %s", v)
		}
	}

	// Windows: a step that prints its environment, a run: step with a
	// secret in its env, a step that fails; their logs and the list.
	run(false, "window", "run", module, "showenv")
	run(false, "window", "logs")
	run(false, "window", "logs", "-o", "json")
	run(false, "window", "run", module, "sweep", "-o", "json")
	run(false, "-v", "window", "run", module, "sweep", "-f", "mesh.yaml")
	run(false, "window", "logs")
	run(true, "window", "run", module, "fails", "-o", "json")
	run(false, "window", "logs", "-o", "json")
	run(false, "window", "list")
	run(false, "window", "list", "-o", "json")

	// The build commands, with the ledger password in the environment.
	req := run(false, "build", "request", module)
	id := regexp.MustCompile(`(?m)^` + module + ` (b-[0-9A-Z]+)$`).FindStringSubmatch(req)
	plan := regexp.MustCompile(`(?m)^(p-[0-9A-Z]+)$`).FindStringSubmatch(req)
	if id == nil || plan == nil {
		t.Fatalf("build request printed %q", req)
	}
	run(false, "build", "record", id[1], "--image", "meshtest/busybox:1", "-o", "json")
	run(false, "build", "current", module)
	run(false, "build", "current", module, "-o", "json")
	run(false, "build", "list", "-o", "json")
	run(false, "build", "plan", plan[1])
	run(false, "build", "export")

	// Failures: a container whose new version exits, an image that cannot
	// be had; then what status and status --check say of them (cron mail).
	run(true, "apply", "-f", "fail.yaml")
	run(true, "apply", "-f", "fail.yaml", "-o", "json")
	run(true, "apply", "-f", "pull.yaml")
	run(true, "apply", "-f", "pull.yaml", "-o", "json")
	run(true, "status", "--check")
	run(false, "status", "-o", "json")
	run(false, "apply", "-f", "mesh.yaml")

	for _, out := range outputs {
		if strings.Contains(out, canaryMark) {
			cmd, _, _ := strings.Cut(out, "\n")
			t.Errorf("a secret was printed, or written to the metrics file, by %s:\n%s", cmd, markCanaries(out))
		}
	}
	if !strings.Contains(outputs[len(outputs)-1], "meshctl_apply_last_success 1") {
		t.Errorf("the last apply wrote no metrics file %s: the check searched nothing there", metricsFile)
	}
	checkStateDir(t, m.State, 5)
}

// checkStateDir searches every file of the state directory for the
// canaries; applied.json, which holds env: as the file wrote it, must be
// 0600 in a 0700 directory.
func checkStateDir(t *testing.T, dir string, minFiles int) {
	t.Helper()
	files := 0
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		if e.IsDir() {
			if fi.Mode().Perm() != 0o700 {
				t.Errorf("%s has mode %04o, want 0700", p, fi.Mode().Perm())
			}
			return nil
		}
		files++
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", p, fi.Mode().Perm())
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if strings.Contains(string(data), canarySecret) {
			t.Errorf("a secret file's content is stored in %s:\n%s", p, markCanaries(string(data)))
		}
		if p == filepath.Join(dir, "applied.json") {
			return nil
		}
		if strings.Contains(string(data), canaryMark) {
			t.Errorf("a secret is stored in %s:\n%s", p, markCanaries(string(data)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < minFiles {
		t.Errorf("only %d files in the state directory: the check searched nothing", files)
	}
}

// markCanaries shows the lines of out that hold a canary.
func markCanaries(out string) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, canaryMark) {
			b.WriteString(">>> " + l + "\n")
		}
	}
	return b.String()
}

// TestCanaryBadInput (the canary check on the paths of
// bad input): a secret in a mesh file or env-file that the decoder or the
// engine refuses — a key set twice in env's list form, a list item
// without "=", a string where env's map belongs, a control character in a
// value — is named by its key and file:line, never quoted, in the text and
// JSON errors of apply, apply --dry-run and window run, in no metrics
// file they wrote, and in no state file (last-apply.json keeps the error).
func TestCanaryBadInput(t *testing.T) {
	host := meshrun.TestEngine(t)
	tests := []struct {
		name    string
		env     string // the container's env:, as YAML
		envFile string // the env-file's text
	}{
		{"a key set twice in list form", `["PW=CANARY-dup-a", "PW=CANARY-dup-b"]`, ""},
		{"a list item without =", `["CANARY-noeq-c"]`, ""},
		{"a string where the map belongs", `"PW=CANARY-str-d"`, ""},
		{"a NUL in a value", `{PW: "CANARY-nul-e\0tail"}`, ""},
		{"a newline in a value", `{PW: "CANARY-nl-f\nINJECTED=1"}`, ""},
		{"a NUL in an env-file line", `{}`, "PW=CANARY-envnul-g\x00tail\n"},
		{"an env-file line without =", `{}`, "CANARY-envnoeq-h\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMeshctl(t, host)
			metricsFile := filepath.Join(m.Dir, "meshctl.prom")
			m.Env = append(m.Env, "MESHCTL_METRICS_FILE="+metricsFile)
			module := fmt.Sprintf("cnb%08x", rand.Uint32())
			m.CleanupModule(module)
			mesh := fmt.Sprintf(`modules:
  %s:
    containers:
      app:
        image: meshtest/busybox:1
        command: [sleep, "3600"]
        network: none
        env: %s
        env-file: [secret.env]
    steps:
      nap:
        exec: [/bin/true]
`, module, tt.env)
			if err := os.WriteFile(filepath.Join(m.Dir, "bad.yaml"), []byte(mesh), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(m.Dir, "secret.env"), []byte(tt.envFile), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"apply", "-f", "bad.yaml"},
				{"apply", "-f", "bad.yaml", "-o", "json"},
				{"apply", "--dry-run", "-f", "bad.yaml", "-o", "json"},
				{"window", "run", module, "nap", "-f", "bad.yaml"},
				{"status", "--check"},
			} {
				stdout, stderr, _ := m.Run2(args...)
				if out := stdout + stderr; strings.Contains(out, canaryMark) {
					t.Errorf("meshctl %s printed a secret:\n%s", strings.Join(args, " "), markCanaries(out))
				}
				if prom, err := os.ReadFile(metricsFile); err == nil && strings.Contains(string(prom), canaryMark) {
					t.Errorf("meshctl %s wrote a secret to the metrics file:\n%s", strings.Join(args, " "), markCanaries(string(prom)))
				}
			}
			if _, err := os.Stat(m.State); err == nil {
				checkStateDir(t, m.State, 5)
			}
		})
	}
}

// TestCanaryEtcdLedger (the ledger password): with an
// etcd ledger, MESHCTL_LEDGER_PASSWORD is in no output of the build
// commands (text, -o json, -v, success or failure) nor in the metrics file
// they write, whether the cluster answers (the test cluster, authentication
// off) or none does; the file-ledger run of TestCanary never sends the
// password anywhere. A wrong password is TestEtcdTLSAndAuth's.
func TestCanaryEtcdLedger(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	m := newMeshctl(t, "unix://"+filepath.Join(t.TempDir(), "no-engine.sock"))
	metricsFile := filepath.Join(m.Dir, "meshctl.prom")
	m.Env = append(m.Env, "MESHCTL_LEDGER_USER=canary", "MESHCTL_LEDGER_PASSWORD="+canaryLedgerPass,
		"MESHCTL_METRICS_FILE="+metricsFile)
	for _, ledger := range []struct{ name, url, want string }{
		{"the test cluster", "etcd://" + eps + etcdtest.Prefix(t.Name()), ""},
		{"no cluster", "etcd://127.0.0.1:" + etcdtest.FreePort(t) + "/meshctl", "did not answer"},
	} {
		for _, args := range [][]string{
			{"build", "request", "web"},
			{"build", "request", "web", "-o", "json"},
			{"-v", "build", "current", "web"},
			{"build", "record", "b-01M8R0TS7B000DBZQPR6TEMNFQ", "--image", "meshtest/busybox:1", "-o", "json"},
			{"build", "list"},
		} {
			args = append([]string{"--ledger", ledger.url, "--lock-timeout", "5s"}, args...)
			stdout, stderr, err := m.Run2(args...)
			out := stdout + stderr
			if ledger.want != "" && (err == nil || !strings.Contains(out, ledger.want)) {
				t.Errorf("%s: meshctl %s: %v, want a failure saying %q:\n%s", ledger.name, strings.Join(args, " "), err, ledger.want, out)
			}
			if prom, err := os.ReadFile(metricsFile); err == nil {
				out += string(prom)
			}
			if strings.Contains(out, canaryMark) {
				t.Errorf("%s: meshctl %s printed the ledger password, or wrote it to the metrics file:\n%s", ledger.name, strings.Join(args, " "), markCanaries(out))
			}
		}
	}
	if _, err := os.Stat(m.State); err == nil {
		checkStateDir(t, m.State, 0)
	}
}
