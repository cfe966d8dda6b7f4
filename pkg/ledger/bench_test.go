package ledger

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// BenchmarkRecord records one build of a module that has history builds
// recorded before it: it must cost about the same whatever the history.
//
// Besides the time, which fsync and a busy machine make noisy, it reports
// what does not depend on the machine's load: the CPU time of the records
// (cpu-ns/op) and the bytes they read and wrote through system calls
// (read-B/op, written-B/op, from /proc/self/io).
func BenchmarkRecord(b *testing.B) {
	for _, history := range []int{0, 10000, 100000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			l, _ := newTestLedger(b)
			seedHistory(b, l, "app", history)
			img := mustImage(b, digestImage("reg/app", 1))
			var cost usage
			runtime.GC() // the seeding's garbage is not the records' cost
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				id := request(b, l, "app").Builds[0].ID
				before := measure()
				b.StartTimer()
				if _, err := l.Record(ctx, id, img, ""); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cost.add(measure().sub(before))
				b.StartTimer()
			}
			n := float64(b.N)
			b.ReportMetric(float64(cost.cpu.Nanoseconds())/n, "cpu-ns/op")
			if cost.io {
				b.ReportMetric(float64(cost.rchar)/n, "read-B/op")
				b.ReportMetric(float64(cost.wchar)/n, "written-B/op")
			}
		})
	}
}

// usage is this process's CPU time and I/O through system calls.
type usage struct {
	cpu          time.Duration
	rchar, wchar int64
	io           bool
}

func measure() usage {
	var u usage
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if data, err := os.ReadFile("/proc/self/io"); err == nil {
		u.io = true
		for line := range strings.Lines(string(data)) {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ": ")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "rchar":
				u.rchar = n
			case "wchar":
				u.wchar = n
			}
		}
	}
	return u
}

func (u usage) sub(v usage) usage {
	return usage{cpu: u.cpu - v.cpu, rchar: u.rchar - v.rchar, wchar: u.wchar - v.wchar, io: u.io && v.io}
}

func (u *usage) add(v usage) {
	u.cpu += v.cpu
	u.rchar += v.rchar
	u.wchar += v.wchar
	u.io = v.io
}

// TestSeedHistory checks that seedHistory lays out the files exactly as
// recording the builds one by one does, for histories around the archive's
// batch and merge boundaries.
func TestSeedHistory(t *testing.T) {
	for _, n := range []int{0, 1, 5, 17, 26, 96, 123} {
		seeded, sd := newTestLedger(t)
		seeded.Retain, seeded.ChunkSize = 5, 2
		seedHistory(t, seeded, "app", n)
		real, rd := newTestLedger(t)
		real.Retain, real.ChunkSize = 5, 2
		for range n {
			rec(t, real, request(t, real, "app").Builds[0].ID, "reg/app:1")
		}
		if got, want := layout(t, sd), layout(t, rd); got != want {
			t.Errorf("%d builds: seeded layout\n%s\nrecorded layout\n%s", n, got, want)
		}
		checkWhole(t, sd)
	}
	// The oldest seeded build is known, pruned, and its record again is
	// idempotent.
	l, _ := newTestLedger(t)
	l.Retain, l.ChunkSize = 5, 2
	seedHistory(t, l, "app", 500)
	r, err := l.Record(ctx, "b-"+seq{hi: uint64(seedStart.UnixMilli()) << 16}.String(), mustImage(t, digestImage("reg/app", 0)), "")
	if err != nil || !r.Again || !r.Build.Pruned {
		t.Errorf("record the oldest seeded build again: %+v, %v", r, err)
	}
}

// layout describes the shape of module app's files: what must not depend on
// how they were written.
func layout(t *testing.T, d *state.Dir) string {
	t.Helper()
	mod, err := readModule(d, "app")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := readCatalog(d, "app")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "recent %d, chunks %d-%d, segments", len(mod.Recent), cat.FirstChunk, mod.NextChunk)
	for _, seg := range cat.Segments {
		fmt.Fprintf(&b, " L%d:%d", seg.Level, seg.Count)
	}
	return b.String()
}

var seedStart = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

func pow(b, e int) int {
	n := 1
	for range e {
		n *= b
	}
	return n
}

// seedHistory writes n successful builds of module m, requested a
// millisecond apart from seedStart, straight into the ledger's files, laid
// out as recording them one by one would have: n/ChunkSize chunks of which
// the newest ceil(Retain/ChunkSize) are kept, the others in the archive
// segments that flushes would have merged them into, oldest in the highest
// level, and the rest in the head.
func seedHistory(tb testing.TB, l *Ledger, m string, n int) {
	tb.Helper()
	if n == 0 {
		return
	}
	lk, err := l.lock(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer lk.Unlock()
	recs := make([]record, n)
	for i := range recs {
		at := seedStart.Add(time.Duration(i) * time.Millisecond)
		recs[i] = record{ID: "b-" + seq{hi: uint64(at.UnixMilli()) << 16}.String(), Plan: "p-" + seq{hi: uint64(at.UnixMilli())<<16 - 1}.String(),
			RequestedAt: at, FinishedAt: at, Image: digestImage("reg/"+m, i), Outcome: OutcomeCurrent}
	}
	size := l.chunkSize()
	keep := (l.retain() + size - 1) / size
	chunks := n / size
	archived := 0 // chunks archived, archiveBatch at a time
	if chunks >= keep+archiveBatch {
		archived = (chunks - keep) / archiveBatch * archiveBatch
	}
	mod := &moduleDoc{Module: m, NextChunk: chunks, Recent: recs[chunks*size:]}
	cat := &catalogDoc{Module: m, FirstChunk: archived}
	// The archive's segments are the digits, in base archiveFanout, of the
	// number of batches archived: digit d at level L is d segments of
	// archiveBatch·size·8^L records. Level maxArchiveLevel takes whatever
	// is left.
	var digits []int
	for a := archived / archiveBatch; a > 0; a /= archiveFanout {
		if len(digits) == maxArchiveLevel {
			digits = append(digits, a)
			break
		}
		digits = append(digits, a%archiveFanout)
	}
	pos := 0
	for level := len(digits) - 1; level >= 0; level-- {
		for range digits[level] {
			part := recs[pos : pos+archiveBatch*size*pow(archiveFanout, level)]
			pos += len(part)
			a := &archiveDoc{Module: m, Seq: cat.NextSegment, Level: level}
			for _, r := range part {
				a.Builds = append(a.Builds, r.compact())
			}
			if err := lk.Write(archiveFile(m, a.Seq), a); err != nil {
				tb.Fatal(err)
			}
			cat.Segments = append(cat.Segments, segmentInfo{Seq: a.Seq, Level: level, Count: len(part), First: part[0].ID, Last: part[len(part)-1].ID})
			cat.NextSegment++
		}
	}
	for c := archived; c < chunks; c++ {
		if err := lk.Write(chunkFile(m, c), &chunkDoc{Module: m, Seq: c, Builds: recs[c*size : (c+1)*size]}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := lk.Write(catalogFile(m), cat); err != nil {
		tb.Fatal(err)
	}
	last := recs[n-1]
	mod.Current, mod.LastRecorded = &last, last.ID
	if err := lk.Write(moduleFile(m), mod); err != nil {
		tb.Fatal(err)
	}
	idx := &indexDoc{Last: last.ID[2:], Pending: map[string]pendingRec{}}
	if err := lk.Write(indexFile, idx); err != nil {
		tb.Fatal(err)
	}
}
