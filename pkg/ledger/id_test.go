package ledger

import (
	"bytes"
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestSeqTextRoundTripsAndSortsAsNumbers(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := []seq{{0, 0}, {0, 1}, {0, 1 << 63}, {1, 0}, {1<<64 - 1, 1<<64 - 1}}
	for range 1000 {
		vals = append(vals, seq{r.Uint64(), r.Uint64()})
	}
	for _, v := range vals {
		s := v.String()
		if len(s) != idLen {
			t.Fatalf("%v encodes to %q, %d characters", v, s, len(s))
		}
		back, ok := parseSeq(s)
		if !ok || back != v {
			t.Fatalf("%v → %q → %v, %v", v, s, back, ok)
		}
	}
	for i := range vals {
		for j := range vals {
			a, b := vals[i], vals[j]
			if a.less(b) != (a.String() < b.String()) {
				t.Fatalf("%v < %v is %v, but as text %q < %q is not", a, b, a.less(b), a.String(), b.String())
			}
		}
	}
	for _, bad := range []string{"", "0", strings.Repeat("0", 25), "8" + strings.Repeat("0", 25), strings.Repeat("0", 25) + "U", strings.Repeat("0", 25) + "a"} {
		if _, ok := parseSeq(bad); ok {
			t.Errorf("parseSeq(%q) accepted it", bad)
		}
	}
}

// TestIDsFollowRequestOrder issues ids with a clock that stands still, steps
// back by an hour, and moves on again: they must increase strictly, and
// carry the clock's time whenever it is past the last id.
func TestIDsFollowRequestOrder(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 3, 30, 0, 0, time.UTC)
	tests := []struct {
		name  string
		clock []time.Time
		// carries[i] is the time id i must carry.
		carries []time.Time
	}{
		{"clock moves on", []time.Time{t0, t0.Add(time.Millisecond), t0.Add(time.Second)},
			[]time.Time{t0, t0.Add(time.Millisecond), t0.Add(time.Second)}},
		{"same millisecond", []time.Time{t0, t0, t0.Add(300 * time.Microsecond), t0},
			[]time.Time{t0, t0, t0, t0}},
		{"clock steps back", []time.Time{t0, t0.Add(-time.Hour), t0.Add(-time.Hour), t0.Add(-time.Minute)},
			[]time.Time{t0, t0, t0, t0}},
		{"clock steps back then catches up", []time.Time{t0, t0.Add(-time.Hour), t0.Add(time.Millisecond)},
			[]time.Time{t0, t0, t0.Add(time.Millisecond)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// All-ones entropy: the low bits start as high as they can, so a
			// carry out of the random part would show.
			l, _ := newTestLedger(t)
			l.Entropy = bytes.NewReader(bytes.Repeat([]byte{0xff}, 1024))
			var prev string
			for i, now := range tt.clock {
				l.Now = func() time.Time { return now }
				p, err := l.Request(context.Background(), []string{"app"}, "")
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range []string{p.ID, p.Builds[0].ID} {
					body := id[2:]
					if body <= prev {
						t.Fatalf("request %d at %s: id %s is not after the previous one (%s)", i, now, id, prev)
					}
					prev = body
					got, err := ParseID(id)
					if err != nil {
						t.Fatal(err)
					}
					if !got.Equal(tt.carries[i]) {
						t.Errorf("request %d at %s: id %s carries %s, want %s", i, now, id, got, tt.carries[i])
					}
				}
			}
		})
	}
}

func TestParseIDRefusesMalformed(t *testing.T) {
	for _, id := range []string{"", "b-", "x-01JNQX6Z2V0000000000000000", "b-01jnqx6z2v0000000000000000", "b-01JNQX6Z2V000000000000000", "01JNQX6Z2V0000000000000000"} {
		if _, err := ParseID(id); err == nil {
			t.Errorf("ParseID(%q) accepted it", id)
		}
	}
	if _, err := ParseID("b-01JNQX6Z2V0000000000000000"); err != nil {
		t.Error(err)
	}
}

// FuzzParseID: an id that parses prints back as itself, and ids order as
// their times do.
func FuzzParseID(f *testing.F) {
	f.Add("b-01JNQX6Z2V0000000000000000", "p-01JNQX6Z2W0000000000000000")
	f.Add("b-7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "b-00000000000000000000000000")
	f.Fuzz(func(t *testing.T, a, b string) {
		ta, errA := ParseID(a)
		tb, errB := ParseID(b)
		for _, id := range []string{a, b} {
			body := strings.TrimPrefix(strings.TrimPrefix(id, "b-"), "p-")
			if s, ok := parseSeq(body); ok && s.String() != body {
				t.Fatalf("%q parses to %v, which prints as %q", id, s, s.String())
			}
		}
		if errA == nil && errB == nil && a[2:] < b[2:] && ta.After(tb) {
			t.Fatalf("%s sorts before %s but carries a later time", a, b)
		}
	})
}

func FuzzParseImage(f *testing.F) {
	f.Add("reg.example/app@sha256:1111111111111111111111111111111111111111111111111111111111111111")
	f.Add("nginx:1.27")
	f.Add("Reg/App")
	f.Fuzz(func(t *testing.T, ref string) {
		img, err := ParseImage(ref)
		if err != nil {
			return
		}
		again, err := ParseImage(img.Normalized)
		if err != nil || again.Normalized != img.Normalized || again.Pinned != img.Pinned {
			t.Fatalf("%q normalizes to %q, which parses to %+v, %v", ref, img.Normalized, again, err)
		}
	})
}

// TestClusterSeqOrderAndRevision issues etcd ids with clocks that disagree:
// each id is above the last whatever the clock, carries the revision it was
// issued at, and two transactions that read at different revisions never
// issue the same id, even from the same last id and the same clock.
func TestClusterSeqOrderAndRevision(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 3, 30, 0, 0, time.UTC)
	zeros := bytes.NewReader(make([]byte, 1<<10))
	var last seq
	for i, c := range []struct {
		now time.Time
		rev int64
	}{{t0, 5}, {t0.Add(2 * time.Minute), 9}, {t0, 12}, {t0, 13}, {t0.Add(-time.Hour), 20}} {
		s, err := clusterSeq(last, c.now, c.rev, 0, zeros)
		if err != nil {
			t.Fatal(err)
		}
		if !last.less(s) || s.rev() != c.rev {
			t.Fatalf("id %d: %v after %v, revision %d; want above the last, revision %d", i, s, last, s.rev(), c.rev)
		}
		last = s
	}
	// An imported file ledger's id in this millisecond, with larger low bits.
	imported := seq{hi: uint64(t0.UnixMilli()) << 16, lo: 1<<64 - 1}
	s, err := clusterSeq(imported, t0, 3, 0, zeros)
	if err != nil || !imported.less(s) || s.ms() != t0.UnixMilli()+1 {
		t.Errorf("after an imported id: %v, %v; want the next millisecond", s, err)
	}
	// Restored from a snapshot: the same last id, the same clock, but the
	// revision bumped: another id.
	a, _ := clusterSeq(last, t0, 30, 0, zeros)
	b, _ := clusterSeq(last, t0, 30+1000000, 0, zeros)
	if a == b {
		t.Errorf("two revisions issued the same id %v", a)
	}
	if _, err := clusterSeq(last, t0, 1<<revBits, 0, zeros); err == nil {
		t.Error("a revision past 2^40 was accepted")
	}
}

// rev is the cluster revision an etcd ledger's id carries (clusterSeq).
func (s seq) rev() int64 { return int64((s.hi&0xffff)<<24 | s.lo>>40) }
