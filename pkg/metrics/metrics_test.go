package metrics

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
)

var t0 = time.Date(2026, 12, 1, 3, 30, 0, 0, time.UTC)

func sampleSnapshot() Snapshot {
	return Snapshot{
		Windows: []coord.Entry{
			{ID: "w-1", Module: "store", Step: "garbage-collect", OpenedAt: t0, ClosedAt: t0.Add(90 * time.Second), Result: "ok"},
			{ID: "w-2", Module: "store", Step: "garbage-collect", OpenedAt: t0.Add(24 * time.Hour), ClosedAt: t0.Add(24*time.Hour + 2500*time.Millisecond), Result: "failed"},
			{ID: "w-3", Module: "db", Step: "vacuum", OpenedAt: t0, ClosedAt: t0.Add(time.Second), Result: "stale"},
		},
		Holds: map[string]int{coord.Orphaned: 1},
		Held:  map[string]int{"changed": 1},
		Apply: &Apply{FinishedAt: t0.Add(time.Hour), OK: false, Actions: map[string]int{"unchanged": 3, "failed": 1}},
		Builds: []Build{
			{Module: "web", Current: "b-01JX", RequestedAt: t0, Pending: 2},
			{Module: "api", Pending: 1},
		},
	}
}

// TestRender: the file says, per step, the last window's result, start and
// duration and the time of the last success (the older ok window, not the
// newer failed one); every hold state, 0 when none; the last apply by
// action; each module's current build and pending count.
func TestRender(t *testing.T) {
	got := string(Render(sampleSnapshot()))
	for _, want := range []string{
		`meshctl_window_last_success{module="store",step="garbage-collect"} 0`,
		`meshctl_window_last_start_timestamp_seconds{module="store",step="garbage-collect"} 1796182200`,
		`meshctl_window_last_duration_seconds{module="store",step="garbage-collect"} 2.500`,
		`meshctl_window_last_success_timestamp_seconds{module="store",step="garbage-collect"} 1796095890`,
		`meshctl_window_last_success{module="db",step="vacuum"} 0`,
		`meshctl_holds{state="open"} 0`,
		`meshctl_holds{state="orphaned"} 1`,
		`meshctl_holds{state="stale"} 0`,
		`meshctl_held_containers{mode="stopped"} 0`,
		`meshctl_held_containers{mode="changed"} 1`,
		`meshctl_apply_last_success 0`,
		`meshctl_apply_last_containers{action="failed"} 1`,
		`meshctl_apply_last_containers{action="unchanged"} 3`,
		`meshctl_build_current_info{module="web",build="b-01JX"} 1`,
		`meshctl_build_current_requested_timestamp_seconds{module="web"} 1796095800`,
		`meshctl_build_pending{module="api"} 1`,
		`meshctl_build_pending{module="web"} 2`,
		"# TYPE meshctl_holds gauge",
	} {
		if !strings.Contains(got, want+"\n") {
			t.Errorf("no line %q in:\n%s", want, got)
		}
	}
	// A step that never succeeded in the history has no last-success
	// sample: an alert takes absent() for it.
	if strings.Contains(got, `meshctl_window_last_success_timestamp_seconds{module="db"`) {
		t.Errorf("a step without a success has a last-success time:\n%s", got)
	}
	// The module without a current build has no _info sample.
	if strings.Contains(got, `meshctl_build_current_info{module="api"`) {
		t.Errorf("a module without a current build has an _info sample:\n%s", got)
	}
	if !bytes.Equal(Render(sampleSnapshot()), []byte(got)) {
		t.Error("Render is not deterministic")
	}
}

// TestRenderEscapes: a label value with a quote, a backslash or a newline
// cannot break the format.
func TestRenderEscapes(t *testing.T) {
	got := string(Render(Snapshot{Builds: []Build{{Module: "a\"b\\c\nd", Current: "x"}}}))
	if !strings.Contains(got, `meshctl_build_pending{module="a\"b\\c\nd"} 0`) {
		t.Errorf("label not escaped:\n%s", got)
	}
}

// TestPromtool: the output passes promtool check metrics (Debian's
// prometheus package; scripts/test installs it). Without promtool the test
// skips, except under CI=true.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and promtool is missing (scripts/test installs Debian's prometheus)")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	for name, s := range map[string]Snapshot{"full": sampleSnapshot(), "empty": {}} {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(Render(s))
		if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) != 0 {
			t.Errorf("%s: promtool check metrics: %v\n%s\n--- input:\n%s", name, err, out, Render(s))
		}
	}
}

// TestWriteAtomic: the file is replaced whole, readable by the collector,
// with no temp file left; a name the collector would not read is refused.
func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meshctl.prom")
	if err := os.WriteFile(path, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, sampleSnapshot()); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, Render(sampleSnapshot())) {
		t.Errorf("file:\n%s", got)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644 (node_exporter reads it as another user)", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	if err := Write(filepath.Join(dir, "meshctl.txt"), Snapshot{}); err == nil || !strings.Contains(err.Error(), ".prom") {
		t.Errorf("a name without .prom: %v", err)
	}
}

// TestAlertRules: the alert rules docs/metrics.md gives pass promtool check
// rules, and name only metrics this package writes (or node_exporter's).
func TestAlertRules(t *testing.T) {
	rules := alertRules(t)
	rendered := string(Render(sampleSnapshot()))
	for _, name := range regexp.MustCompile(`\bmeshctl_[a-z_]+`).FindAllString(rules, -1) {
		if !strings.Contains(rendered, "# TYPE "+name+" gauge") {
			t.Errorf("the alert rules name %s, which meshctl does not write", name)
		}
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and promtool is missing")
		}
		t.Skip("promtool not installed")
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
}

// TestAlertRulesFire: the alert rules of docs/metrics.md fire when they
// should and only then (promtool test rules, testdata/alerts_test.yaml): the
// garbage-collect alert for a host whose last success is 3 days old, for a
// host whose windows all failed while another host's succeed, and when no
// host ever ran it; the stale-hold alert once a hold has been stale 10
// minutes.
func TestAlertRulesFire(t *testing.T) {
	rules := alertRules(t)
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true and promtool is missing")
		}
		t.Skip("promtool not installed")
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"rules.yaml": rules, "alerts_test.yaml": string(tests)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "test", "rules", "alerts_test.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// alertRules returns the yaml block under "## Alert rules" in docs/metrics.md.
func alertRules(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "## Alert rules\n\n```yaml\n")
	if !ok {
		t.Fatal("docs/metrics.md has no yaml block under ## Alert rules")
	}
	rules, _, _ := strings.Cut(rest, "```")
	return rules
}
