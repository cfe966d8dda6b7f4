package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/internal/etcdtest"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
)

// benchHost is one simulated host: a state directory and a fake engine.
// Its stops take down, so a stop-first recreate keeps it down that long.
type benchHost struct {
	name, dir string
	eng       *enginetest.Fake
}

// benchHosts makes n hosts whose engines count how many are down at once.
// A host is down from its container's stop to its next start.
func benchHosts(b *testing.B, n int, down time.Duration, now, most *atomic.Int64) []*benchHost {
	var hosts []*benchHost
	for i := range n {
		h := &benchHost{name: fmt.Sprintf("h%03d", i), dir: filepath.Join(b.TempDir(), "state"), eng: enginetest.NewFake("meshtest/busybox:1")}
		h.eng.Hook = func(op, _ string) {
			switch op {
			case enginetest.OpStop:
				d := now.Add(1)
				for m := most.Load(); d > m && !most.CompareAndSwap(m, d); m = most.Load() {
				}
				time.Sleep(down)
			case enginetest.OpStart:
				if now.Load() > 0 {
					now.Add(-1)
				}
			}
		}
		hosts = append(hosts, h)
	}
	return hosts
}

// apply runs meshctl apply on host h with the file that sets V to v.
func (h *benchHost) apply(ctx context.Context, ledgerURL, file string) error {
	var out bytes.Buffer
	env := NewEnv(strings.NewReader(""), &out, &out)
	env.NewEngine = func(string) (engine.Client, error) { return h.eng, nil }
	code := Run(ctx, env, []string{"--state-dir", h.dir, "--host-name", h.name, "--ledger", ledgerURL,
		"--lock-timeout", "10m", "-q", "apply", "-f", file, "--settle", "0s"})
	if code != 0 {
		return fmt.Errorf("%s: exit %d: %s", h.name, code, out.String())
	}
	return nil
}

// BenchmarkMeshBudgetHundredHosts: 100 hosts, each a state directory and a
// fake engine driven through pkg/cli, apply one stop-first change at once
// under max-unavailable 10, against the real etcd cluster. Each host is
// down for a fixed time per recreate. It reports the most hosts down at
// once (never over 10), and the total against its floor: 10 waves of that
// down time. MESHCTL_BENCH_HOSTS and MESHCTL_BENCH_DOWN change the sizes.
func BenchmarkMeshBudgetHundredHosts(b *testing.B) {
	eps := etcdtest.Endpoints(b)
	n, budget, down := 100, 10, 200*time.Millisecond
	if v, err := strconv.Atoi(os.Getenv("MESHCTL_BENCH_HOSTS")); err == nil && v > 0 {
		n = v
	}
	if v, err := time.ParseDuration(os.Getenv("MESHCTL_BENCH_DOWN")); err == nil && v > 0 {
		down = v
	}
	files := map[string]string{}
	for _, v := range []string{"1", "2"} {
		files[v] = filepath.Join(b.TempDir(), "mesh-"+v+".yaml")
		doc := fmt.Sprintf("modules:\n  bench:\n    max-unavailable: %d\n    containers:\n      app: {image: meshtest/busybox:1, command: [sleep, '1000'], env: {V: %q}}\n", budget, v)
		if err := os.WriteFile(files[v], []byte(doc), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	var worst time.Duration
	var mostDown int64
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		url := "etcd://" + eps + etcdtest.Prefix(fmt.Sprintf("%s-%d", b.Name(), i))
		var now, most atomic.Int64
		hosts := benchHosts(b, n, down, &now, &most)
		for _, h := range hosts {
			if err := h.apply(ctx, url, files["1"]); err != nil {
				b.Fatal(err)
			}
		}
		most.Store(0)
		b.StartTimer()
		begin := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for _, h := range hosts {
			wg.Go(func() { errs <- h.apply(ctx, url, files["2"]) })
		}
		wg.Wait()
		took := time.Since(begin)
		b.StopTimer()
		close(errs)
		for err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		if m := most.Load(); m > int64(budget) {
			b.Fatalf("%d hosts were down at once, max-unavailable %d", m, budget)
		}
		worst, mostDown = max(worst, took), max(mostDown, most.Load())
		b.StartTimer()
	}
	floor := time.Duration((n+budget-1)/budget) * down
	b.ReportMetric(float64(mostDown), "most-down")
	b.ReportMetric(worst.Seconds(), "s-worst")
	b.ReportMetric(worst.Seconds()/floor.Seconds(), "x-floor")
}

// BenchmarkMeshWindowHundredHosts: 100 hosts, each a state directory and a
// fake engine driven through pkg/cli, run one mesh: all window at once
// against the real etcd cluster. Its step only notes that it ran. So the
// time is the gathering, the holds, the start, the end and the closes.
// In "stopped" each host holds its container stopped, and takes a slot of
// max-unavailable 100. In "changed" each holds it changed, and takes none.
// It reports the worst total, and the worst times to the last join, to
// the recorded start and to the recorded end. It fails unless every window
// exits 0 and the step ran once. MESHCTL_BENCH_HOSTS changes the hosts.
func BenchmarkMeshWindowHundredHosts(b *testing.B) {
	eps := etcdtest.Endpoints(b)
	n := 100
	if v, err := strconv.Atoi(os.Getenv("MESHCTL_BENCH_HOSTS")); err == nil && v > 0 {
		n = v
	}
	for _, c := range []struct{ name, hold string }{
		{"stopped", "while-stopped: [app]"},
		{"changed", "while-changed: {app: {env: {SWEEP: '1'}}}"},
	} {
		b.Run(c.name, func(b *testing.B) { benchMeshWindow(b, eps, n, c.hold) })
	}
}

func benchMeshWindow(b *testing.B, eps string, n int, hold string) {
	dir := b.TempDir()
	runs := filepath.Join(dir, "runs")
	file := meshWindowFileOf(b, dir, max(100, n), hold, "5m", "echo ran >>"+runs)
	ctx := context.Background()
	var worst, joined, started, ended time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		if err := os.Remove(runs); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
		url := "etcd://" + eps + etcdtest.Prefix(fmt.Sprintf("%s-%d", b.Name(), i))
		hosts := make([]*meshHost, n)
		for j := range hosts {
			hosts[j] = &meshHost{name: fmt.Sprintf("h%03d", j), dir: filepath.Join(b.TempDir(), "state"),
				ledger: url, eng: enginetest.NewFake("meshtest/busybox:1")}
			if code, errOut := hosts[j].run(ctx, "apply", "-f", file, "--settle", "0s"); code != 0 {
				b.Fatalf("%s: apply exit %d: %s", hosts[j].name, code, errOut)
			}
		}
		codes := make([]int, n)
		errs := make([]string, n)
		b.StartTimer()
		begin := time.Now()
		var wg sync.WaitGroup
		for j, h := range hosts {
			wg.Go(func() { codes[j], errs[j] = h.run(ctx, "window", "run", "sweep", "gc", "--settle", "0s") })
		}
		wg.Wait()
		took := time.Since(begin)
		b.StopTimer()
		for j, h := range hosts {
			if codes[j] != 0 {
				b.Fatalf("%s: window exit %d: %s", h.name, codes[j], errs[j])
			}
			if c, ok := h.eng.Get("sweep.app"); !ok || !c.Running {
				b.Fatalf("%s: sweep.app does not run after the window", h.name)
			}
		}
		out, _ := os.ReadFile(runs)
		if got := strings.Count(string(out), "ran"); got != 1 {
			b.Fatalf("the step ran %d times, want once", got)
		}
		g := benchGathering(b, url, "sweep")
		if g.State != ledger.GatherEnded || g.End == nil || len(g.Members) != n {
			b.Fatalf("gathering %s: %s with %d members, want ended with %d", g.ID, g.State, len(g.Members), n)
		}
		var last time.Time
		for _, m := range g.Members {
			if !m.Closed || !m.Back {
				b.Fatalf("%s: not closed and back in gathering %s", m.Host, g.ID)
			}
			if m.JoinedAt.After(last) {
				last = m.JoinedAt
			}
		}
		worst, joined = max(worst, took), max(joined, last.Sub(begin))
		started, ended = max(started, g.StartedAt.Sub(begin)), max(ended, g.End.At.Sub(begin))
		b.StartTimer()
	}
	b.ReportMetric(worst.Seconds(), "s-worst")
	b.ReportMetric(joined.Seconds(), "s-joined")
	b.ReportMetric(started.Seconds(), "s-started")
	b.ReportMetric(ended.Seconds(), "s-ended")
}

// benchGathering reads module's current gathering from the ledger at url.
func benchGathering(b *testing.B, url, module string) ledger.Gathering {
	cfg, err := ledger.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Timeout = time.Minute
	l, err := ledger.OpenEtcd(*cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	g, ok, err := l.Gathering(context.Background(), module)
	if err != nil || !ok {
		b.Fatalf("gathering of %s: found %v, %v", module, ok, err)
	}
	return g
}
