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
