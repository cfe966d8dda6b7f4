package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReadmeFirstRun runs the README's "A first run" as written, on the test
// engine: its mesh file, then its commands one by one (the registry on
// 127.0.0.1:5000, an image pushed, the garbage-collect window, status), then
// the cron line of "Scheduling it" with cron's environment (env -i, PATH
// /usr/bin:/bin, the crontab's variables): a newcomer's first run must work
// (issue 22 items 1 and 2). The line's /usr/local/bin/meshctl is this test's
// meshctl; everything else is the README's.
func TestReadmeFirstRun(t *testing.T) {
	host := testEngine(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker CLI")
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	first := section(t, string(readme), "## A first run")
	meshFile := fenced(t, first, "yaml")
	commands := fenced(t, first, "sh")
	cron := fenced(t, section(t, string(readme), "## Scheduling it"), "")

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
	if err := os.WriteFile(filepath.Join(m.dir, "mesh.yaml"), []byte(meshFile), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(commands), "\n") {
		line = strings.TrimSpace(strings.SplitN(line, " #", 2)[0])
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "docker push") || strings.Contains(line, "docker push") {
			waitRegistry(t)
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", line)
		cmd.Dir = m.dir
		cmd.Env = append(append([]string{}, m.env...), "PATH="+filepath.Dir(m.bin)+":"+os.Getenv("PATH"), "DOCKER_CONFIG="+filepath.Join(m.dir, "docker"))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("README's first run: %s: %v\n%s", line, err, out)
		}
	}

	// The crontab: its variable lines, then its job line, run as cron runs it.
	env := []string{"PATH=/usr/bin:/bin", "SHELL=/bin/sh", "HOME=" + filepath.Join(m.dir, "home"), "LOGNAME=root"}
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
				env = append(env, name+"="+m.state)
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
	job = m.bin + strings.TrimPrefix(job, "/usr/local/bin/meshctl")
	cmd := exec.Command("env", append(append([]string{"-i"}, env...), "/bin/sh", "-c", job)...)
	cmd.Dir = filepath.Join(m.dir)
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

// waitRegistry waits until the registry of the README answers on 127.0.0.1:5000.
func waitRegistry(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://127.0.0.1:5000/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the README's registry does not answer on 127.0.0.1:5000: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
