package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// runMeshctl runs meshctl in-process on the state directory dir, with a
// clock that moves on by a second at each reading.
func runMeshctl(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := NewEnv(strings.NewReader(""), &out, &errb)
	now := time.Date(2025, 3, 1, 3, 30, 0, 0, time.UTC)
	env.Now = func() time.Time { now = now.Add(time.Second); return now }
	code = Run(context.Background(), env, append([]string{"--state-dir", dir}, args...))
	return code, out.String(), errb.String()
}

func jsonKeys(t *testing.T, doc any) []string {
	t.Helper()
	m, ok := doc.(map[string]any)
	if !ok {
		t.Fatalf("%v is not a JSON object", doc)
	}
	return slices.Sorted(maps.Keys(m))
}

// TestBuildJSONKeys pins the keys of every build command's JSON document
// (CONTRACT §7): scripts and pipelines parse them.
func TestBuildJSONKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	decode := func(args ...string) map[string]any {
		t.Helper()
		code, out, errs := runMeshctl(t, dir, append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("meshctl %s: exit %d: %s", strings.Join(args, " "), code, errs)
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("meshctl %s: %v in %q", strings.Join(args, " "), err, out)
		}
		return doc
	}
	check := func(what string, doc any, want ...string) {
		t.Helper()
		if got := jsonKeys(t, doc); !slices.Equal(got, want) {
			t.Errorf("%s keys %v, want %v", what, got, want)
		}
	}

	req := decode("build", "request", "store")
	check("request", req, "builds", "plan")
	b := req["builds"].([]any)[0].(map[string]any)
	check("request build", b, "id", "module", "requested_at")
	id, plan := b["id"].(string), req["plan"].(string)

	rec := decode("build", "record", id, "--image", "reg/store@sha256:"+strings.Repeat("1", 64))
	check("record", rec, "current", "id", "module", "outcome")
	check("record current", rec["current"], "id", "image")
	if rec["outcome"] != "current" {
		t.Errorf("record outcome %v", rec["outcome"])
	}

	check("current", decode("build", "current", "store"), "finished_at", "id", "image", "module", "requested_at")

	list := decode("build", "list")
	check("list", list, "builds")
	check("list build", list["builds"].([]any)[0], "finished_at", "id", "image", "module", "plan", "requested_at", "state")

	p := decode("build", "plan", plan)
	check("plan", p, "builds", "id", "settled")
	check("plan build", p["builds"].([]any)[0], "id", "module", "state")
	if p["settled"] != true {
		t.Errorf("plan settled %v", p["settled"])
	}
}

func TestBuildExitCodes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	_, out, _ := runMeshctl(t, dir, "build", "request", "store")
	id := strings.Fields(strings.Split(out, "\n")[1])[1]
	img1, img2 := "reg/store@sha256:"+strings.Repeat("1", 64), "reg/store@sha256:"+strings.Repeat("2", 64)
	tests := []struct {
		args []string
		want int
	}{
		{[]string{"build", "current", "store"}, 2},
		{[]string{"build", "record", id, "--image", img1}, 0},
		{[]string{"build", "record", id, "--image", img1}, 0},
		{[]string{"build", "record", id, "--image", img2}, 4},
		{[]string{"build", "record", id, "--failed"}, 4},
		{[]string{"build", "record", "b-01JNQX6Z2V0000000000000000", "--failed"}, 2},
		{[]string{"build", "record", id, "--image", "Bad/Ref"}, 2},
		{[]string{"build", "record", id}, 2},
		{[]string{"build", "request", "Bad"}, 2},
		{[]string{"build", "plan", "p-01JNQX6Z2V0000000000000000"}, 2},
		{[]string{"build", "list", "Bad"}, 2},
		{[]string{"build", "current", "store"}, 0},
	}
	for _, tt := range tests {
		if code, _, errs := runMeshctl(t, dir, tt.args...); code != tt.want {
			t.Errorf("meshctl %s: exit %d, want %d (%s)", strings.Join(tt.args, " "), code, tt.want, errs)
		}
	}
}
