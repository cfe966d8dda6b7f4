package apply_test

import (
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/apply"
	"github.com/meshctl/meshctl/pkg/window"
)

// BenchmarkUnrelatedWorkDuringSlowStop measures what a window on one module
// costs others: while window A on store waits out the graceful stop of
// store.registry (10s, real time, as a registry that takes its whole stop
// timeout), each op runs one window on module other (exec: [true]) and one
// apply of the whole file. Neither may wait for A's stop: the benchmark
// fails if A's stop ended before the last op did.
func BenchmarkUnrelatedWorkDuringSlowStop(b *testing.B) {
	const slowStop = 10 * time.Second
	x := startInterleave(b, slowStop)
	ctx := b.Context()
	var (
		n                 int
		windows, applies  time.Duration
		longest, longestA time.Duration
	)
	for b.Loop() {
		t0 := time.Now()
		e, err := x.windowOther(ctx)
		if err != nil || e.Result != window.ResultOK {
			b.Fatalf("window other/gc: %v, %+v", err, e)
		}
		t1 := time.Now()
		rep, err := x.apply(ctx)
		if err != nil {
			b.Fatalf("apply: %v", err)
		}
		for _, c := range rep.Containers {
			if c.Name == "store.registry" && c.Action != apply.Held {
				b.Fatalf("apply: store.registry %s, want held", c.Action)
			}
		}
		w, a := t1.Sub(t0), time.Since(t1)
		windows, applies, n = windows+w, applies+a, n+1
		longest, longestA = max(longest, w), max(longestA, a)
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.Logf("%d ops: window %.2f ms (longest %.2f), apply %.2f ms (longest %.2f)",
		n, ms(windows)/float64(n), ms(longest), ms(applies)/float64(n), ms(longestA))
	if c, _ := x.eng.Get("store.registry"); !c.Running {
		b.Fatalf("window A's %s stop of store.registry ended before the last op did: the ops waited for it", slowStop)
	}
	b.ReportMetric(ms(windows)/float64(n), "ms/window")
	b.ReportMetric(ms(applies)/float64(n), "ms/apply")
	b.ReportMetric(0, "ns/op") // the two above say it, apart
}
