package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/etcdproxy"
	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/internal/faultproxy"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestMeshEtcdAnswersLost runs each host's meshctl through an etcd proxy
// of its own (internal/etcdproxy), in front of one member. Each round
// loses the answers of, or refuses, calls of one host's window: the Nth
// gRPC call, N drawn over that host's calls in a round without faults, and
// every call for a time after it: none, 3 s, or 12 s, past the session's
// lease (ledger.WindowTTL), each in turn. The mesh must fail closed: by the engines'
// events nothing normal runs while the step runs. Then, the proxies clean,
// each host's next apply must heal it all (healAndCheck). Three faults
// always; MESHCTL_STRESS=1 makes it 40 (or MESHCTL_STRESS_KILLS=N).
func TestMeshEtcdAnswersLost(t *testing.T) {
	target := strings.Split(etcdtest.Endpoints(t), ",")[0]
	proxies := map[string]*etcdproxy.Proxy{}
	r := newMeshRigWith(t, func(h *meshHost, prefix string) string {
		p, err := etcdproxy.Start(target)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		proxies[h.name] = p
		return "etcd://" + p.Addr() + prefix
	})
	faults := stressKills(t, 3, 40)

	// A round without faults: how many calls each host's window makes.
	from, calls := map[string]int{}, map[string]int{}
	mark := func(m map[string]int) {
		for name, p := range proxies {
			m[name] = len(p.Calls()) - from[name]
		}
	}
	r.beforeHeal = func() { mark(calls) }
	r.round("recording round", func([]*meshWin) string { mark(from); return "" })
	t.Logf("a mesh window's round makes etcd calls %v, by host", calls)

	fired := 0
	r.beforeHeal = func() {
		for _, p := range proxies {
			p.SetRules()
		}
	}
	for i := range faults {
		h := r.hosts[i%len(r.hosts)]
		p := proxies[h.name]
		// Stratified over the host's calls, as TestMeshKills over the life.
		slots := min(faults, 8)
		n := 1 + int((float64(i%slots)+rand.Float64())/float64(slots)*float64(calls[h.name]))
		outage := []time.Duration{0, 3 * time.Second, 12 * time.Second}[i%3]
		action := etcdproxy.Action(rand.IntN(2))
		before := len(p.Fired())
		p.SetRules(etcdproxy.Rule{Nth: n, Action: action, For: outage})
		ws := r.round(fmt.Sprintf("fault %d (%s %s's call #%d and the calls of %s after it)", i, actionName(action), h.name, n, outage), nil)
		f := p.Fired()[before:]
		if len(f) > 0 {
			fired++
		}
		t.Logf("fault %d: %d call(s) cut (%s); %s was %s", i, len(f), firstLast(f), h.name, role(ws, h.name))
	}
	t.Logf("%d of %d faults fired", fired, faults)
}

// firstLast names the first and the last of the calls a rule cut.
func firstLast(f []string) string {
	switch len(f) {
	case 0:
		return "none: fewer calls"
	case 1:
		return f[0]
	}
	return f[0] + " .. " + f[len(f)-1]
}

func actionName(a etcdproxy.Action) string {
	if a == etcdproxy.Refuse {
		return "refuse"
	}
	return "lose the answer of"
}

// TestMeshEngineFails fails the Nth engine call of host-a's window, host-a
// a member or the runner by the gathering's race, N drawn over the calls of
// a round without faults, through a fault proxy on its engine's socket
// (internal/faultproxy). Under stress, half the faults drop the answer
// instead: the engine acted, meshctl never heard. The invariants are
// TestMeshKills's. Three faults always; MESHCTL_STRESS=1 makes it 40 (or
// MESHCTL_STRESS_KILLS=N).
func TestMeshEngineFails(t *testing.T) {
	r := newMeshRig(t)
	h := r.hosts[0]
	p, err := faultproxy.Start(filepath.Join(t.TempDir(), "engine.sock"), h.sock, faultproxy.NewSchedule(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	h.SetEnv("DOCKER_HOST", p.Host())
	faults := stressKills(t, 3, 40)

	var from, calls int
	r.beforeHeal = func() { calls = len(p.Calls()) - from }
	r.round("recording round", func([]*meshWin) string { from = len(p.Calls()); return "" })
	t.Logf("%s's window makes %d engine calls", h.name, calls)

	r.beforeHeal = func() { p.SetSchedule(faultproxy.NewSchedule(1)) }
	for i := range faults {
		slots := min(faults, 8)
		n := 1 + int((float64(i%slots)+rand.Float64())/float64(slots)*float64(calls))
		from := len(p.Calls())
		class := faultproxy.Fail
		if faults > 3 && rand.IntN(2) == 0 {
			class = faultproxy.Drop
		}
		p.SetSchedule(faultproxy.NewSchedule(uint64(i), faultproxy.Rule{Nth: n, Class: class}))
		ws := r.round(fmt.Sprintf("fault %d (%s %s's engine call #%d)", i, class, h.name, n), nil)
		call := "none: fewer calls"
		for _, c := range p.Calls()[from:] {
			if c.Fault != "" {
				call = c.Method + " " + c.Route
			}
		}
		t.Logf("fault %d: %s %s; %s was %s", i, class, call, h.name, role(ws, h.name))
	}
}

// role says whether host ran the round's step.
func role(ws []*meshWin, host string) string {
	if runnerOf(ws) == host {
		return "the runner"
	}
	return "a member"
}

// TestMeshLeaderKilled SIGKILLs the etcd cluster's leader at an instant
// drawn over a mesh window's life, then starts it again. The invariants are
// TestMeshKills's. One kill always (a kill takes the cluster's lock and
// about 3 s); MESHCTL_STRESS=1 makes it 10 (or MESHCTL_STRESS_KILLS=N).
func TestMeshLeaderKilled(t *testing.T) {
	eps := strings.Split(etcdtest.Endpoints(t), ",")
	if len(eps) < 3 {
		t.Skipf("the test etcd has %d member(s): a leader killed leaves no quorum to go on with (scripts/etcd.sh start gives three)", len(eps))
	}
	dir := os.Getenv("MESHCTL_TEST_ETCD_DIR")
	if dir == "" {
		t.Skip("MESHCTL_TEST_ETCD_DIR is not set: the leader is killed through scripts/etcd.sh (eval \"$(scripts/etcd.sh env)\")")
	}
	r := newMeshRig(t)
	life := r.calibrate(1)
	kills := stressKills(t, 1, 10)
	for i := range kills {
		delay := time.Duration(rand.Float64() * float64(life))
		r.round(fmt.Sprintf("leader kill %d", i), func(ws []*meshWin) string {
			time.Sleep(delay)
			phase := meshPhase(ws[0].stderr.String())
			n := killLeader(t, dir, eps)
			t.Logf("leader kill %d: member %s after %s, %s in %s", i, n, delay.Round(time.Millisecond), ws[0].h.name, phase)
			return ""
		})
	}
}

// killLeader SIGKILLs the member that leads through scripts/etcd.sh, which
// signals only the pids it recorded, and starts it again 1.5 s later. It
// returns the member's number. One leader kill at a time across test
// packages: pkg/ledger's linearizable test takes the same lock.
func killLeader(t *testing.T, dir string, eps []string) string {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "leader-kill.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	n := leaderMember(t, eps)
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "etcd.sh"))
	etcdScript(t, script, dir, eps, "kill-member", n)
	time.Sleep(1500 * time.Millisecond)
	etcdScript(t, script, dir, eps, "start-member", n)
	return n
}

func etcdScript(t *testing.T, script, dir string, eps []string, args ...string) {
	t.Helper()
	cmd := exec.Command(script, args...)
	cmd.Env = etcdtest.ScriptEnv(dir, eps)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

// leaderMember returns the scripts/etcd.sh number (1-based, in endpoint
// order) of the member that leads.
func leaderMember(t *testing.T, eps []string) string {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	for i, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			return fmt.Sprint(i + 1)
		}
	}
	t.Fatal("no etcd member says it leads")
	return ""
}
