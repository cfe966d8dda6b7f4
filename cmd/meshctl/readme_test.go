package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeFirstRun runs the README's first run as pasted. The block runs
// as one bash script, from the checkout, on the test engine. Only its
// engine line is skipped: the test engine stands in for it. Then the test
// runs the crontab of the "cron" section as cron would. Its
// /usr/local/bin/meshctl is the block's own build.
func TestReadmeFirstRun(t *testing.T) {
	host := testEngine(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI")
	}
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script := firstRunScript(t, fenced(t, section(t, string(readme), "## A first run"), "sh"))
	cron := fenced(t, section(t, string(readme), "## cron"), "")

	// A registry that ever stored an image collects fine: the store's volume
	// must be new, and is removed after the module (cleanups run last first).
	if out, err := exec.Command("docker", "-H", host, "volume", "ls", "-q", "--filter", "name=^store-data$").Output(); err != nil || len(out) != 0 {
		t.Fatalf("the test engine already has a volume store-data (%v); remove it", err)
	}
	m := newMeshctl(t, host)
	t.Cleanup(func() {
		_ = exec.Command("docker", "-H", host, "image", "rm", "-f", "127.0.0.1:5000/hello:1").Run()
		_ = exec.Command("docker", "-H", host, "volume", "rm", "-f", "store-data").Run()
	})
	t.Cleanup(func() { m.cleanupModule("store") })
	tmp := filepath.Join(m.dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", script)
	cmd.Dir = repo
	cmd.Env = append(append(append([]string{}, m.env...), goEnv(t)...),
		"DOCKER_HOST="+host, "MESHCTL_TEST_DOCKER_HOST="+host, "MESHCTL_ENGINE_DIR="+os.Getenv("MESHCTL_ENGINE_DIR"),
		"DOCKER_CONFIG="+filepath.Join(m.dir, "docker"), "TMPDIR="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("README's first run: %v\n%s", err, out)
	}
	t.Logf("README's first run:\n%s", out)
	states, _ := filepath.Glob(filepath.Join(tmp, "tmp.*", "state"))
	if len(states) != 1 {
		t.Fatalf("the first run's state directory: want one under %s, found %q", tmp, states)
	}
	runCron(t, cron, filepath.Join(repo, "bin", "meshctl"), states[0], host, m.dir)
}

// firstRunScript returns the README's first-run block as a script. It drops
// each line that starts an engine: its comment begins "the engine". It
// waits for the registry before the push.
func firstRunScript(t *testing.T, block string) string {
	t.Helper()
	var lines []string
	skipped := 0
	for _, line := range strings.Split(block, "\n") {
		if _, comment, ok := strings.Cut(line, " # "); ok && strings.HasPrefix(strings.TrimSpace(comment), "the engine") {
			if !strings.Contains(line, "scripts/engine.sh") {
				t.Fatalf("the README marks %q as the engine line, but it starts no engine", line)
			}
			skipped++
			continue
		}
		if strings.Contains(line, "docker push") {
			// The registry listens a moment after its start; on a loaded
			// machine that moment can outlast the apply's settle period.
			lines = append(lines, "timeout 30 bash -c 'until (exec 3<>/dev/tcp/127.0.0.1/5000) 2>/dev/null; do sleep 0.2; done'")
		}
		lines = append(lines, line)
	}
	if skipped == 0 {
		t.Fatal(`the README's first run has no line marked "# the engine…" for this test to skip`)
	}
	return strings.Join(lines, "\n")
}

// goEnv returns the Go settings of this test's environment. The first run's
// build needs them. Its HOME and XDG dirs are the test's own, with no build
// cache.
func goEnv(t *testing.T) []string {
	t.Helper()
	names := []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GOSUMDB", "GOTOOLCHAIN", "GONOSUMDB", "GOPRIVATE"}
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	values := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(values) != len(names) {
		t.Fatalf("go env printed %d lines for %d names", len(values), len(names))
	}
	env := make([]string, len(names))
	for i, name := range names {
		env[i] = name + "=" + values[i]
	}
	return env
}

// runCron runs the README's crontab as cron runs it, under env -i. The
// crontab's variables come first, then its job. The job's
// /usr/local/bin/meshctl is bin.
func runCron(t *testing.T, cron, bin, state, host, dir string) {
	t.Helper()
	env := []string{"PATH=/usr/bin:/bin", "SHELL=/bin/sh", "HOME=" + filepath.Join(dir, "home"), "LOGNAME=root"}
	var job string
	assign := regexp.MustCompile(`^([A-Z_]+)=(.*)$`)
	for _, line := range strings.Split(cron, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case assign.MatchString(line):
			// The README's values are the defaults; this test's state dir and
			// engine are not, which is what the README says to set them for.
			switch name := assign.FindStringSubmatch(line)[1]; name {
			case "MESHCTL_STATE_DIR":
				env = append(env, name+"="+state)
			case "DOCKER_HOST":
				env = append(env, name+"="+host)
			default:
				env = append(env, line)
			}
		default:
			fields := strings.Fields(line)
			if len(fields) < 6 {
				t.Fatalf("crontab line %q: want 5 time fields and a command", line)
			}
			job = strings.Join(fields[5:], " ")
		}
	}
	if !strings.HasPrefix(job, "/usr/local/bin/meshctl ") {
		t.Fatalf("the README's cron job %q must name meshctl by its absolute path: cron's PATH is /usr/bin:/bin", job)
	}
	job = bin + strings.TrimPrefix(job, "/usr/local/bin/meshctl")
	cmd := exec.Command("env", append(append([]string{"-i"}, env...), "/bin/sh", "-c", job)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the README's cron line under cron's environment: %v\n%s", err, out)
	} else if len(out) != 0 {
		t.Errorf("the cron line (-q) printed on success, which cron mails:\n%s", out)
	}
}

// section returns the README's text from heading to the next "## " heading.
func section(t *testing.T, text, heading string) string {
	t.Helper()
	i := strings.Index(text, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("README has no %q section", heading)
	}
	rest := text[i+len(heading)+2:]
	if j := strings.Index(rest, "\n## "); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// fenced returns the first fenced block of the given language ("" for a
// bare fence) in text.
func fenced(t *testing.T, text, lang string) string {
	t.Helper()
	open := "```" + lang + "\n"
	i := strings.Index(text, open)
	if i < 0 {
		t.Fatalf("no %q block in:\n%s", open, text)
	}
	body := text[i+len(open):]
	j := strings.Index(body, "```")
	if j < 0 {
		t.Fatalf("unclosed %q block", open)
	}
	return body[:j]
}
