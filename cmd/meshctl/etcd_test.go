package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestEtcdScripts runs testdata/etcd/*.txtar: the scripts of the etcd
// ledger, each with MESHCTL_LEDGER set to a prefix of its own in the test
// cluster (ETCD_EPS names its endpoints).
func TestEtcdScripts(t *testing.T) {
	eps := etcdtest.Endpoints(t)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "etcd"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("MESHCTL_UPDATE_SCRIPTS") == "1",
		Setup: func(env *testscript.Env) error {
			if err := setup(env); err != nil {
				return err
			}
			env.Setenv("ETCD_EPS", eps)
			env.Setenv("MESHCTL_LEDGER", "etcd://"+eps+etcdtest.Prefix(filepath.Base(env.WorkDir)))
			env.Setenv("MESHCTL_TEST_ETCD_DIR", os.Getenv("MESHCTL_TEST_ETCD_DIR"))
			return nil
		},
		Condition: condition,
		Cmds:      scriptCmds(),
	})
}

// builder is one build pipeline's view of the ledger: it runs meshctl as a
// process, as CI would, on one host's state directory.
type builder struct {
	t      *testing.T
	host   string // state directory
	ledger string
	// retry: a command that exits 1 saying the ledger did not answer is
	// run again until it succeeds (the leader-kill run); otherwise every
	// command must succeed.
	retry   bool
	retried *atomic.Int64
}

func (b *builder) run(args ...string) string {
	for {
		cmd := exec.Command("meshctl", append([]string{"--state-dir", b.host, "--lock-timeout", "5s"}, args...)...)
		cmd.Env = append(os.Environ(), "MESHCTL_LEDGER="+b.ledger)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil {
			return stdout.String()
		}
		var ee *exec.ExitError
		if b.retry && errors.As(err, &ee) && ee.ExitCode() == 1 && strings.Contains(stderr.String(), "etcd ledger at ") {
			b.retried.Add(1)
			continue
		}
		b.t.Errorf("meshctl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		return ""
	}
}

type issued struct {
	id          string
	call, ret   time.Time
	image       string // "" for a failed build
	recorded    bool
	worker, seq int
}

// work requests n builds of module app and records them: every fifth one
// failed, and in pairs whose newer build is recorded first.
func (b *builder) work(worker, n int, out chan<- issued) {
	request := func(seq int) issued {
		call := time.Now()
		s := b.run("build", "request", "app")
		_, id, _ := strings.Cut(strings.Split(strings.TrimSpace(s), "\n")[1], " ")
		return issued{id: id, call: call, ret: time.Now(), worker: worker, seq: seq}
	}
	record := func(is issued) {
		if is.id == "" {
			return
		}
		if is.seq%5 == 4 {
			b.run("build", "record", is.id, "--failed")
		} else {
			is.image = fmt.Sprintf("reg.example/app@sha256:%064x", worker<<16|is.seq)
			b.run("build", "record", is.id, "--image", is.image)
		}
		is.recorded = !b.t.Failed()
		out <- is
	}
	for i := 0; i < n && !b.t.Failed(); i += 2 {
		older := request(i)
		if i+1 == n {
			record(older)
			break
		}
		newer := request(i + 1)
		record(newer)
		record(older)
	}
}

// TestMeshBuildsFromTwoHosts runs 4 builder processes on each of 2 hosts,
// 25 builds each, against one etcd ledger: 200 unique ids, in request order
// (a request that returned before another began has the smaller id), and
// current is the newest successful request.
func TestMeshBuildsFromTwoHosts(t *testing.T) {
	meshBuilds(t, 4, 25, false)
}

// TestMeshBuildsLeaderKilled is the same run with the cluster's leader
// killed (SIGKILL) in the middle and started again: each command succeeds or
// exits 1 naming the ledger, and succeeds when run again; no record is lost
// or reordered.
func TestMeshBuildsLeaderKilled(t *testing.T) {
	meshBuilds(t, 2, 15, true)
}

func meshBuilds(t *testing.T, perHost, builds int, killLeader bool) {
	eps := etcdtest.Endpoints(t)
	ledger := "etcd://" + eps + etcdtest.Prefix(t.Name())
	out := make(chan issued, 2*perHost*builds)
	var retried atomic.Int64
	var wg sync.WaitGroup
	for h := range 2 {
		host := filepath.Join(t.TempDir(), fmt.Sprintf("host-%d", h))
		for p := range perHost {
			b := &builder{t: t, host: host, ledger: ledger, retry: killLeader, retried: &retried}
			wg.Go(func() { b.work(h*perHost+p, builds, out) })
		}
	}
	if killLeader {
		time.Sleep(time.Second)
		killEtcdLeader(t, strings.Split(eps, ","))
	}
	wg.Wait()
	close(out)
	if t.Failed() {
		return
	}
	var all []issued
	for is := range out {
		all = append(all, is)
	}
	if want := 2 * perHost * builds; len(all) != want {
		t.Fatalf("%d builds recorded, want %d", len(all), want)
	}
	ids := map[string]bool{}
	var newest issued
	for _, is := range all {
		if ids[is.id] {
			t.Errorf("id %s issued twice", is.id)
		}
		ids[is.id] = true
		if is.image != "" && is.id > newest.id {
			newest = is
		}
		for _, o := range all {
			if o.ret.Before(is.call) && o.id >= is.id {
				t.Errorf("request of %s returned before that of %s began, but its id is not smaller", o.id, is.id)
			}
		}
	}
	b := &builder{t: t, host: filepath.Join(t.TempDir(), "reader"), ledger: ledger}
	if got := strings.TrimSpace(b.run("build", "current", "app")); got != newest.image {
		t.Errorf("current image %s, want %s, of the newest successful request %s", got, newest.image, newest.id)
	}
	var list struct {
		Builds []struct{ ID, State, Image string }
	}
	if err := json.Unmarshal([]byte(b.run("-o", "json", "build", "list", "app")), &list); err != nil {
		t.Fatal(err)
	}
	recorded := 0
	for _, l := range list.Builds {
		if l.State != "pending" {
			recorded++
		}
		if want := l.ID == newest.id; (l.State == "current") != want {
			t.Errorf("build %s is %s", l.ID, l.State)
		}
	}
	if recorded != len(all) {
		t.Errorf("the ledger lists %d recorded builds, want %d", recorded, len(all))
	}
	t.Logf("%d builds from 2 hosts; %d commands exited 1 (ledger unreachable) and succeeded when run again", len(all), retried.Load())
}

// killEtcdLeader SIGKILLs the leading member through scripts/etcd.sh (which
// signals only the pids it recorded) and starts it again 1.5s later.
func killEtcdLeader(t *testing.T, endpoints []string) {
	t.Helper()
	// One leader kill at a time across test packages (pkg/ledger kills too):
	// two at once would leave the cluster without a quorum.
	dir := os.Getenv("MESHCTL_TEST_ETCD_DIR")
	if dir == "" {
		t.Fatal("MESHCTL_TEST_ETCD_DIR is not set: eval \"$(scripts/etcd.sh env)\"")
	}
	lk, err := os.OpenFile(filepath.Join(dir, "leader-kill.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lk.Close()
	if err := syscall.Flock(int(lk.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	member := ""
	for i, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err == nil && st.Leader == st.Header.MemberId {
			member = fmt.Sprint(i + 1)
		}
	}
	if member == "" {
		t.Fatal("no member says it leads")
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "etcd.sh"))
	etcdSh := func(args ...string) {
		cmd := exec.Command(script, args...)
		cmd.Env = etcdtest.ScriptEnv(dir, endpoints)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("etcd.sh %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	etcdSh("kill-member", member)
	t.Logf("killed the leader, member %s", member)
	time.Sleep(1500 * time.Millisecond)
	etcdSh("start-member", member)
}
