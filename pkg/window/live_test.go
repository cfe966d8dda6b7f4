package window

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// testLive is a live log on clock c whose saves are recorded, not written.
func testLive(c *fakeClock, saves *[]LiveLog) *liveLog {
	return &liveLog{
		now:  c.now,
		save: func(doc *LiveLog) error { *saves = append(*saves, *doc); return nil },
		warn: func(string, ...any) {},
		tail: NewTail(LogLimit),
		doc:  LiveLog{ID: "w-1", Module: "m", Step: "s"},
	}
}

// TestLiveLogSavesAtMostOnceASecond writes a line every 10 ms for 100 s of
// a fake clock, ticking between writes. The live log is saved at most once
// per LiveEvery, each save a second or more after the one before.
func TestLiveLogSavesAtMostOnceASecond(t *testing.T) {
	c := &fakeClock{t: time.Date(2026, 12, 2, 3, 30, 0, 0, time.UTC)}
	var saves []LiveLog
	var at []time.Time
	l := testLive(c, &saves)
	l.save = func(doc *LiveLog) error { saves = append(saves, *doc); at = append(at, c.t); return nil }
	l.mu.Lock()
	l.doc.StartedAt = c.t
	l.saveLocked()
	l.mu.Unlock()
	for i := range 10000 {
		c.t = c.t.Add(10 * time.Millisecond)
		l.write([]byte("blob " + strings.Repeat("x", i%7) + "\n"))
		l.tick()
	}
	if len(saves) > 101 || len(saves) < 99 {
		t.Fatalf("%d saves in 100 s of writes, want about 100 (one a second)", len(saves))
	}
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < LiveEvery {
			t.Fatalf("save %d came %s after the one before, less than %s", i, d, LiveEvery)
		}
	}
	last := saves[len(saves)-1]
	if last.Written == 0 || !strings.HasPrefix(last.LastLine, "blob") {
		t.Fatalf("last save: written %d, last line %q", last.Written, last.LastLine)
	}
}

// TestLiveLogSavesASilentLastLine writes one line and then nothing. A tick
// a second later saves it, so the line does not wait for the next write.
// A tick with nothing new saves nothing.
func TestLiveLogSavesASilentLastLine(t *testing.T) {
	c := &fakeClock{t: time.Date(2026, 12, 2, 3, 30, 0, 0, time.UTC)}
	var saves []LiveLog
	l := testLive(c, &saves)
	l.mu.Lock()
	l.saveLocked()
	l.mu.Unlock()
	c.t = c.t.Add(100 * time.Millisecond)
	l.write([]byte("marking\n"))
	l.tick()
	if len(saves) != 1 {
		t.Fatalf("%d saves within a second of the first, want 1", len(saves))
	}
	c.t = c.t.Add(LiveEvery)
	l.tick()
	if len(saves) != 2 || saves[1].LastLine != "marking" || saves[1].Output != "marking\n" {
		t.Fatalf("saves after a silent second: %+v", saves)
	}
	c.t = c.t.Add(10 * LiveEvery)
	l.tick()
	if len(saves) != 2 {
		t.Fatalf("a tick with nothing new saved: %d saves", len(saves))
	}
	if at := saves[1].LastLineAt; at == nil || !at.Equal(c.t.Add(-10*LiveEvery-LiveEvery)) {
		t.Fatalf("last_line_at %v, want the time of the write", at)
	}
	l.end()
	if len(saves) != 3 || !saves[2].Ended {
		t.Fatalf("end saved %+v", saves)
	}
}

// TestLiveLogLastLine takes the last non-empty line, a partial one too, and
// starts a line over at a carriage return.
func TestLiveLogLastLine(t *testing.T) {
	for _, tc := range []struct{ writes, want string }{
		{"a\nb\n", "b"},
		{"a\nb\n\n\n", "b"},
		{"a\npart", "part"},
		{"10%\r20%\r", "20%"},
		{"done\r\n", "done"},
		{"", ""},
	} {
		c := &fakeClock{t: time.Now()}
		var saves []LiveLog
		l := testLive(c, &saves)
		for _, part := range strings.SplitAfter(tc.writes, "\n") {
			l.write([]byte(part))
		}
		l.end()
		if got := saves[len(saves)-1].LastLine; got != tc.want {
			t.Errorf("writes %q: last line %q, want %q", tc.writes, got, tc.want)
		}
	}
}

// TestLastLineEscapesAndCuts escapes control characters and bytes that
// are not UTF-8, and cuts at LastLineMax characters with an ellipsis.
func TestLastLineEscapesAndCuts(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"a\tb", `a\tb`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"bad\xffutf8", `bad\xffutf8`},
		{"c1\u0085x", `c1\u0085x`},
		{"blob sha256:é✓", "blob sha256:é✓"},
	} {
		if got := LastLine([]byte(tc.in)); got != tc.want {
			t.Errorf("LastLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	exact := strings.Repeat("é", LastLineMax)
	if got := LastLine([]byte(exact)); got != exact {
		t.Errorf("a line of exactly %d characters was changed: %q", LastLineMax, got)
	}
	for _, long := range []string{strings.Repeat("é", LastLineMax+1), strings.Repeat("x", 5000), strings.Repeat("\x1b", 300)} {
		got := LastLine([]byte(long))
		if n := utf8.RuneCountInString(got); n > LastLineMax || !strings.HasSuffix(got, "…") {
			t.Errorf("a line of %d bytes: %d characters, %q", len(long), n, got[max(0, len(got)-20):])
		}
		// An escape is never cut in half.
		if strings.HasSuffix(strings.TrimSuffix(got, "…"), `\`) || strings.HasSuffix(strings.TrimSuffix(got, "…"), `\x`) {
			t.Errorf("an escape was cut: %q", got[len(got)-12:])
		}
	}
}

// TestStalled reports a live window's step silent for its stall-after, and
// neither one that printed within it, nor one ended, off or not live.
func TestStalled(t *testing.T) {
	start := time.Date(2026, 12, 2, 3, 30, 0, 0, time.UTC)
	printed := start.Add(time.Minute)
	view := func(state string, l *LiveLog) OpenView {
		return OpenView{View: coord.View{ID: "w-1", State: state}, live: l}
	}
	live := &LiveLog{StartedAt: start, StallAfter: 30 * time.Minute, LastLineAt: &printed}
	for _, tc := range []struct {
		name string
		v    OpenView
		now  time.Time
		want bool
	}{
		{"silent long enough", view(coord.Open, live), printed.Add(30 * time.Minute), true},
		{"overdue and silent", view(coord.Overdue, live), printed.Add(time.Hour), true},
		{"printed lately", view(coord.Open, live), printed.Add(29 * time.Minute), false},
		{"never printed", view(coord.Open, &LiveLog{StartedAt: start, StallAfter: time.Minute}), start.Add(time.Minute), true},
		{"off", view(coord.Open, &LiveLog{StartedAt: start, LastLineAt: &printed}), printed.Add(48 * time.Hour), false},
		{"ended", view(coord.Open, &LiveLog{StartedAt: start, StallAfter: time.Minute, Ended: true}), start.Add(time.Hour), false},
		{"orphaned", view(coord.Orphaned, live), printed.Add(time.Hour), false},
		{"no live log", view(coord.Open, nil), printed.Add(time.Hour), false},
	} {
		if _, _, got := tc.v.Stalled(tc.now); got != tc.want {
			t.Errorf("%s: stalled %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPrintNew prints what a follower has not printed, and notes a gap the
// tail no longer holds.
func TestPrintNew(t *testing.T) {
	var out, notes strings.Builder
	opts := FollowOptions{Print: func(s string) { out.WriteString(s) }, Note: func(f string, a ...any) { notes.WriteString(f) }}
	n := printNew(&LiveLog{Written: 4, Output: "ab\ncd"[1:]}, 0, opts)
	if n != 4 || out.String() != "b\ncd" {
		t.Fatalf("first: %d %q", n, out.String())
	}
	n = printNew(&LiveLog{Written: 6, Output: "b\ncdef"}, n, opts)
	if n != 6 || out.String() != "b\ncdef" || notes.Len() != 0 {
		t.Fatalf("second: %d %q %q", n, out.String(), notes.String())
	}
	n = printNew(&LiveLog{Written: 20, Output: "xyz"}, n, opts)
	if n != 20 || !strings.HasSuffix(out.String(), "xyz") || notes.Len() == 0 {
		t.Fatalf("a gap: %d %q, notes %q", n, out.String(), notes.String())
	}
}

// TestLeftLiveLogIsNotAStepsOutput leaves the live log of a window that
// died, beside a live window's. Only a window whose hold is recorded reads
// its live log. The close's sweep removes a dead one and a killed write's
// temp file, and keeps a live window's and a just-closed one's.
func TestLeftLiveLogIsNotAStepsOutput(t *testing.T) {
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, id := range []string{"w-dead", "w-live", "w-just"} {
		if err := d.WriteLoose(liveName(id), &LiveLog{ID: id, Output: "out of " + id + "\n", LastLine: "out of " + id}); err != nil {
			t.Fatal(err)
		}
	}
	temp := filepath.Join(d.Path(), LogDir, ".w-dead.live.tmp-loose-123")
	if err := os.WriteFile(temp, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	writeHold(t, d, coord.Hold{ID: "w-live", Module: "m", Step: "s"})
	l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hist := coord.History{Windows: []coord.Entry{
		{ID: "w-dead", Module: "m", Step: "s", Result: coord.Stale, ClosedAt: now.Add(-time.Hour)},
		{ID: "w-just", Module: "m", Step: "s", Result: ResultOK, ClosedAt: now},
	}}
	if err := l.Write(coord.HistoryFile, &hist); err != nil {
		t.Fatal(err)
	}
	l.Unlock()

	if _, err := ReadLog(d, "w-dead"); err == nil || !strings.Contains(err.Error(), "kept no step log") {
		t.Fatalf("a dead window's left live log was read as its log: %v", err)
	}
	got, err := ReadLog(d, "w-live")
	if err != nil || !got.Live || got.Output != "out of w-live\n" {
		t.Fatalf("the open window's log: %+v, %v", got, err)
	}
	views := Progress(d, []coord.View{{ID: "w-live", State: coord.Open}}, now, func(string, ...any) {})
	if views[0].LastLine != "out of w-live" {
		t.Fatalf("progress %+v", views[0])
	}

	l, err = d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := removeLeftLive(l, d, now); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	for id, want := range map[string]bool{"w-dead": false, "w-live": true, "w-just": true} {
		if _, ok, err := ReadLive(d, id); err != nil || ok != want {
			t.Errorf("%s.live kept %v, want %v (%v)", id, ok, want, err)
		}
	}
	if _, err := os.Stat(temp); !os.IsNotExist(err) {
		t.Errorf("a killed write's temp file stays: %v", err)
	}
}

// TestFollow follows a window's live log as it grows, through its close,
// and prints every byte once. A window whose process died before its close
// ends the follow with an error, after what it printed.
func TestFollow(t *testing.T) {
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	winLock, err := d.Lock(ctx, coord.WindowLock("w-1"), state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	writeHold(t, d, coord.Hold{ID: "w-1", Module: "m", Step: "s"})
	live := func(out string, ended bool) {
		if err := d.WriteLoose(liveName("w-1"), &LiveLog{ID: "w-1", Written: int64(len(out)), Output: out, Ended: ended}); err != nil {
			t.Error(err)
		}
	}
	live("one\n", false)
	var out strings.Builder
	var mu sync.Mutex
	opts := FollowOptions{Poll: 5 * time.Millisecond,
		Print: func(s string) { mu.Lock(); out.WriteString(s); mu.Unlock() },
		Note:  func(f string, a ...any) { t.Errorf("note: "+f, a...) }}
	printed := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	done := make(chan *coord.Entry)
	go func() {
		e, err := Follow(ctx, d, "w-1", opts)
		if err != nil {
			t.Error(err)
		}
		done <- e
	}()
	waitFor(t, func() bool { return printed() == "one\n" })
	live("one\ntwo\n", false)
	waitFor(t, func() bool { return printed() == "one\ntwo\n" })
	live("one\ntwo\nthree\n", true)
	l, err := d.Lock(ctx, coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{}}); err != nil {
		t.Fatal(err)
	}
	if err := l.Write(coord.HistoryFile, &coord.History{Windows: []coord.Entry{{ID: "w-1", Result: ResultFailed}}}); err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	winLock.Unlock()
	select {
	case e := <-done:
		if e == nil || e.Result != ResultFailed || printed() != "one\ntwo\nthree\n" {
			t.Fatalf("followed to %+v, printed %q", e, printed())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("follow did not end at the close")
	}

	// A window that died: its hold is recorded, its lock free.
	writeHold(t, d, coord.Hold{ID: "w-2", Module: "m", Step: "s"})
	if err := d.WriteLoose(liveName("w-2"), &LiveLog{ID: "w-2", Written: 5, Output: "last\n"}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	_, err = Follow(ctx, d, "w-2", opts)
	if err == nil || !strings.Contains(err.Error(), "died before its close") || printed() != "last\n" {
		t.Fatalf("a dead window followed: %v, printed %q", err, printed())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 2000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not met within 10 s")
}
