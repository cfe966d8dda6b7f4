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

// TestPrintGatherings: a mesh window reads with its runner first, each
// host's state, and a note: when it gives up gathering, where its step
// runs, how it ended, or why it failed. A lapsed member of a window not
// over reads lapsed. With no mesh window, nothing is printed.
func TestPrintGatherings(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 31, 0, 0, time.UTC)
	code := 0
	gs := []ledger.Gathering{
		{ID: "g-1", Module: "store", Step: "gc", State: ledger.GatherStarted, Runner: "host-b", StartedAt: at,
			Members: []ledger.GatherMember{{Host: "host-a", Joined: true, Alive: true, Held: true},
				{Host: "host-b", Joined: true, Alive: false, Held: true}, {Host: "host-c", Joined: true, Alive: true}}},
		{ID: "g-2", Module: "web", Step: "sweep", State: ledger.GatherFailed, Runner: "host-a", Failure: "host-c did not join by the deadline",
			Members: []ledger.GatherMember{{Host: "host-a", Joined: true}, {Host: "host-c"}}},
		{ID: "g-3", Module: "db", Step: "vacuum", State: ledger.GatherEnded, Runner: "host-a",
			End:     &ledger.StepEnd{Result: "ok", Code: &code, At: at, By: "host-a"},
			Members: []ledger.GatherMember{{Host: "host-a", Joined: true, Closed: true, Back: true}, {Host: "host-b", Joined: true, Closed: true}}},
	}
	var out bytes.Buffer
	if err := printGatherings(&out, gs); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"MESH WINDOW", "g-1 ", "store/gc", "host-b (runner) lapsed, host-a held, host-c joined", "step running on host-b since",
		"host-a (runner) joined, host-c not joined", "failed: host-c did not join by the deadline",
		"host-a (runner) back, host-b closed, not all back", "step ok, exit 0 at", "(recorded by host-a)",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := printGatherings(&out, nil); err != nil || out.Len() != 0 {
		t.Errorf("no mesh window printed %q, %v", out.String(), err)
	}
}

// TestMeshViewShowsGatherings: window list --mesh shows a module's mesh
// window as etcd has it, its runner and who has not joined, in text and
// in JSON.
func TestMeshViewShowsGatherings(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	ctx := context.Background()
	url := "etcd://" + eps + etcdtest.Prefix(t.Name())
	env := NewEnv(strings.NewReader(""), &bytes.Buffer{}, &bytes.Buffer{})
	env.Global.Ledger, env.Global.LockTimeout = url, 5*time.Second
	cfg, _ := env.etcdLedger()
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, h := range []string{"host-a", "host-b"} {
		if err := l.PutMember(ctx, ledger.Member{Host: h, Module: "store", Steps: map[string]string{"gc": "h1"}}); err != nil {
			t.Fatal(err)
		}
	}
	g, err := l.JoinGathering(ctx, ledger.Join{Module: "store", Step: "gc", Host: "host-a", Hash: "h1", PID: 1, Gather: time.Minute, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Leave()
	meshctl := func(args ...string) string {
		var out, errb bytes.Buffer
		e := NewEnv(strings.NewReader(""), &out, &errb)
		e.Global.StateDir = t.TempDir()
		if code := Run(ctx, e, append([]string{"--ledger", url}, args...)); code != 0 {
			t.Fatalf("meshctl %v: exit %d\n%s", args, code, errb.String())
		}
		return out.String()
	}
	out := meshctl("window", "list", "--mesh")
	for _, want := range []string{"MESH WINDOW", "store/gc", "gathering", "host-a (runner) joined, host-b not joined", "gathers until"} {
		if !strings.Contains(out, want) {
			t.Errorf("window list --mesh has no %q:\n%s", want, out)
		}
	}
	var doc meshJSON
	if err := json.Unmarshal([]byte(meshctl("-o", "json", "status", "--mesh")), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Gatherings) != 1 || doc.Gatherings[0].Runner != "host-a" || doc.Gatherings[0].State != ledger.GatherOpen {
		t.Errorf("status --mesh -o json gatherings: %+v", doc.Gatherings)
	}
}
