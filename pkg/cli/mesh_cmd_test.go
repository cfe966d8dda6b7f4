package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/ledger"
)

// TestMeshCommands: mesh hosts lists members, up or down with the slot
// they hold; mesh release gives a slot back whoever holds it; mesh forget
// removes a host's records and says what it removed. A host or slot with
// no record is exit 2, and so is every mesh command without etcd.
func TestMeshCommands(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	ctx := context.Background()
	url := "etcd://" + eps + etcdtest.Prefix(t.Name())
	meshctl := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		env := NewEnv(strings.NewReader(""), &out, &errb)
		env.Global.StateDir = t.TempDir()
		code := Run(ctx, env, append([]string{"--ledger", url, "--lock-timeout", "5s"}, args...))
		if code != want {
			t.Fatalf("meshctl %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}
	env := NewEnv(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	env.Global.Ledger, env.Global.LockTimeout = url, 5*time.Second
	cfg, _ := env.etcdLedger()
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	if out := meshctl(0, "mesh", "hosts"); !strings.Contains(out, "no host runs a module that uses the mesh (max-unavailable or mesh: all)") {
		t.Errorf("mesh hosts of an empty mesh: %q", out)
	}
	for _, h := range []string{"web-1", "web-2"} {
		if err := l.PutMember(ctx, ledger.Member{Host: h, Module: "web", MaxUnavailable: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := l.TakeSlot(ctx, ledger.Slot{Host: "web-2", Module: "web", Token: "dead", PID: 4242, TakenAt: time.Now(),
		Containers: []string{"web.app"}}, 1); err != nil || !b.Taken {
		t.Fatalf("take: %+v, %v", b, err)
	}
	// A member for its mesh: all step alone: no budget.
	if err := l.PutMember(ctx, ledger.Member{Host: "web-3", Module: "web", Steps: map[string]string{"gc": "0123456789abcdef"}}); err != nil {
		t.Fatal(err)
	}
	out := meshctl(0, "mesh", "hosts", "web")
	for _, want := range []string{"MODULE  HOST   MAX-UNAVAILABLE  STEPS  STATE", "web     web-1  1                -      up",
		"web     web-2  1                -      down: slot held since", "by pid 4242 (web.app)",
		"web     web-3  -                gc     up"} {
		if !strings.Contains(out, want) {
			t.Errorf("mesh hosts has no %q:\n%s", want, out)
		}
	}
	var hosts meshHostsJSON
	if err := json.Unmarshal([]byte(meshctl(0, "-o", "json", "mesh", "hosts")), &hosts); err != nil {
		t.Fatal(err)
	}
	if len(hosts.Members) != 3 || hosts.Members[1].State != "down" || len(hosts.Slots) != 1 || hosts.Slots[0].PID != 4242 {
		t.Errorf("mesh hosts -o json: %+v", hosts)
	}
	// The key is there for a member without a budget too: 0.
	var raw struct{ Members []map[string]any }
	if err := json.Unmarshal([]byte(meshctl(0, "-o", "json", "mesh", "hosts", "web")), &raw); err != nil || len(raw.Members) != 3 {
		t.Fatalf("mesh hosts -o json: %+v, %v", raw, err)
	}
	if v, ok := raw.Members[2]["max_unavailable"]; !ok || v != 0.0 {
		t.Errorf("mesh hosts -o json: web-3's max_unavailable %v (set %v), want 0", v, ok)
	}

	if out := meshctl(2, "mesh", "release", "web", "web-1"); !strings.Contains(out, "host web-1 holds no slot of module web") {
		t.Errorf("release of no slot: %q", out)
	}
	if out := meshctl(0, "mesh", "release", "web", "web-2"); !strings.Contains(out, "released host web-2's slot of module web") {
		t.Errorf("release: %q", out)
	}
	if st, _ := l.Mesh(ctx, "web"); len(st.Slots) != 0 {
		t.Errorf("after release: %+v", st.Slots)
	}

	if out := meshctl(0, "mesh", "forget", "web-2"); !strings.Contains(out, "removed host web-2 from module web (max-unavailable 1)") {
		t.Errorf("forget: %q", out)
	}
	if out := meshctl(2, "mesh", "forget", "web-2"); !strings.Contains(out, "host web-2 has no record in the mesh") {
		t.Errorf("forget again: %q", out)
	}
	if out := meshctl(0, "mesh", "forget", "web-3"); !strings.Contains(out, "removed host web-3 from module web (no max-unavailable)") {
		t.Errorf("forget web-3: %q", out)
	}
	if st, _ := l.Mesh(ctx, ""); len(st.Members) != 1 || st.Members[0].Host != "web-1" {
		t.Errorf("after forget: %+v", st.Members)
	}

	var errb bytes.Buffer
	fenv := NewEnv(strings.NewReader(""), &bytes.Buffer{}, &errb)
	fenv.Global.StateDir = t.TempDir()
	if code := Run(ctx, fenv, []string{"--ledger", "file", "mesh", "hosts"}); code != 2 || !strings.Contains(errb.String(), "set --ledger etcd://") {
		t.Errorf("mesh hosts without etcd: exit %d, %q", code, errb.String())
	}
}
