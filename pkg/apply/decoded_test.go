package apply

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// cachedSource is a mesh file of n containers as bytes, for the decode
// cache.
func cachedSource(t testing.TB, n int) record.DecodeInput {
	t.Helper()
	var b strings.Builder
	b.WriteString("modules:\n  m:\n    containers:\n")
	for i := range n {
		fmt.Fprintf(&b, "      c%04d: {image: %s, env: {N: %q}}\n", i, busybox, fmt.Sprint(i))
	}
	return record.DecodeInput{Src: &mesh.Source{Name: "mesh.yaml", Data: []byte(b.String()), Dir: t.TempDir()}, Build: "test"}
}

// applyCached applies in through the decode cache, as the command does.
// It reports whether the cache gave the file.
func applyCached(t testing.TB, d *state.Dir, eng *enginetest.Fake, in record.DecodeInput) (*record.Report, bool, error) {
	t.Helper()
	c, hit := record.LookupDecoded(d, in)
	f := (*mesh.File)(nil)
	if hit {
		f = c.File
	} else {
		var err error
		if f, err = in.Src.Decode(); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := run(t, d, eng, f, func(o *Options) { o.Decode, o.Cached = in, c })
	return rep, hit, err
}

// TestCachedDecodeIsANoOp checks that the second apply of the same bytes
// takes its file from the cache, and is a no-op of two engine calls.
func TestCachedDecodeIsANoOp(t *testing.T) {
	d, eng, in := stateDir(t), enginetest.NewFake(busybox), cachedSource(t, 3)
	if _, hit, err := applyCached(t, d, eng, in); err != nil || hit {
		t.Fatalf("first apply: hit %v, err %v; want a miss", hit, err)
	}
	eng.Changes()
	eng.ResetCalls()
	rep, hit, err := applyCached(t, d, eng, in)
	if err != nil || !hit {
		t.Fatalf("second apply: hit %v, err %v; want a hit", hit, err)
	}
	if rep.EngineCalls != 2 || rep.Changed {
		t.Errorf("cached no-op apply: engine_calls %d, changed %v; want 2, false", rep.EngineCalls, rep.Changed)
	}
}

// TestCachedDecodeRecheckedUnderLock checks that a cached decode whose
// applied.json changed before the lock was had is refused, changing
// nothing. The decision made before the lock is checked again under it.
func TestCachedDecodeRecheckedUnderLock(t *testing.T) {
	d, eng, in := stateDir(t), enginetest.NewFake(busybox), cachedSource(t, 2)
	if _, _, err := applyCached(t, d, eng, in); err != nil {
		t.Fatal(err)
	}
	c, hit := record.LookupDecoded(d, in)
	if !hit {
		t.Fatal("no hit after an apply")
	}
	// Another apply, of another file, changes applied.json meanwhile.
	other := meshOf(t, "x: {image: "+busybox+"}")
	other.Modules["n"] = other.Modules["m"]
	delete(other.Modules, "m")
	if _, err := run(t, d, eng, other, nil); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	_, err := run(t, d, eng, c.File, func(o *Options) { o.Decode, o.Cached = in, c })
	if !errors.Is(err, ErrStaleDecode) {
		t.Fatalf("stale cached decode: err %v, want ErrStaleDecode", err)
	}
	if ch := eng.Changes(); len(ch) > 0 {
		t.Errorf("a stale cached decode changed the engine: %q", ch)
	}
}

// BenchmarkNoOpApply is a no-op apply of n containers against the fake
// engine, from the file's bytes: its decode, through the cache or not, and
// the apply.
func BenchmarkNoOpApply(b *testing.B) {
	for _, n := range []int{40, 200, 1000} {
		for _, cached := range []bool{false, true} {
			b.Run(fmt.Sprintf("containers=%d/cached=%v", n, cached), func(b *testing.B) {
				d, eng, in := stateDir(b), enginetest.NewFake(busybox), cachedSource(b, n)
				if !cached {
					in.Build = "" // nothing is cached
				}
				if _, _, err := applyCached(b, d, eng, in); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					rep, hit, err := applyCached(b, d, eng, in)
					if err != nil || hit != cached || rep.Changed {
						b.Fatalf("hit %v, changed %v, err %v", hit, rep.Changed, err)
					}
				}
			})
		}
	}
}
