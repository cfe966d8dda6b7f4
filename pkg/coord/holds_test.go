package coord

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

func openTemp(t *testing.T) *state.Dir {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// lockWindow takes window id's liveness lock in this process, as a live
// window does, until the test ends or the returned func is called.
func lockWindow(t *testing.T, d *state.Dir, id string) func() {
	t.Helper()
	l, err := d.Lock(context.Background(), WindowLock(id), state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Unlock() })
	return func() { l.Unlock() }
}

var t0 = time.Date(2026, 3, 1, 3, 30, 2, 0, time.UTC)

func hold(id string) Hold {
	return Hold{ID: id, Module: "store", Step: "garbage-collect", PID: 4242,
		Containers: []string{"store.registry"}, OpenedAt: t0, Deadline: t0.Add(time.Hour)}
}

// TestStateOf classifies holds against real flocks: a hold is alive exactly
// while some open file holds its window lock.
func TestClassifyStates(t *testing.T) {
	d := openTemp(t)
	lockWindow(t, d, "w-alive")
	// A window that ran and released its lock (the file stays).
	release := lockWindow(t, d, "w-dead")
	release()

	withStep := func(h Hold) Hold { h.StepContainer = "meshctl-window.store.garbage-collect"; return h }
	running := func(string) bool { return true }
	exited := func(string) bool { return false }
	tests := []struct {
		name    string
		hold    Hold
		now     time.Time
		running func(string) bool
		want    string
	}{
		{"alive before its deadline", hold("w-alive"), t0.Add(time.Minute), exited, Open},
		{"alive at its deadline", hold("w-alive"), t0.Add(time.Hour), exited, Open},
		{"alive past its deadline", hold("w-alive"), t0.Add(time.Hour + time.Second), exited, Overdue},
		{"alive with its step container running", withStep(hold("w-alive")), t0, running, Open},
		{"dead, its step container runs", withStep(hold("w-dead")), t0, running, Orphaned},
		{"dead, its step container runs, past the deadline", withStep(hold("w-dead")), t0.Add(2 * time.Hour), running, Orphaned},
		{"dead, its step container exited", withStep(hold("w-dead")), t0, exited, Stale},
		{"dead, exec step (no step container)", hold("w-dead"), t0, running, Stale},
		{"dead, the engine could not say", withStep(hold("w-dead")), t0, nil, Unknown},
		{"lock file never made", hold("w-never"), t0, exited, Stale},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked []string
			steps := func() (func(string) bool, error) {
				if tt.running == nil {
					return nil, errors.New("engine away")
				}
				return func(name string) bool {
					asked = append(asked, name)
					return tt.running(name)
				}, nil
			}
			got, _, err := Liveness{Dir: d}.Classify(&HoldsDoc{Holds: []Hold{tt.hold}}, tt.now, steps)
			if err != nil {
				t.Fatal(err)
			}
			if got[0].State != tt.want {
				t.Errorf("state = %s, want %s", got[0].State, tt.want)
			}
			if tt.hold.StepContainer == "" && len(asked) > 0 {
				t.Errorf("asked the engine about %v for a hold without a step container", asked)
			}
			for _, n := range asked {
				if n != tt.hold.StepContainer {
					t.Errorf("asked about %q, want %q", n, tt.hold.StepContainer)
				}
			}
		})
	}
}

// TestClassifyLocksBeforeEngine: the engine is listed once, after every
// window lock was checked. Here the window dies during the listing, which
// saw no step container yet: had the listing come first, the lock would then
// read free and the hold stale, though the window may have started its step
// container between the two. Checked first, the lock says the window lived.
func TestClassifyLocksBeforeEngine(t *testing.T) {
	d := openTemp(t)
	release := lockWindow(t, d, "w-racing")
	h := hold("w-racing")
	h.StepContainer = "meshctl-window.store.garbage-collect"
	calls := 0
	steps := func() (func(string) bool, error) {
		calls++
		release() // the window dies while the engine is being listed
		return func(string) bool { return false }, nil
	}
	got, _, err := Liveness{Dir: d}.Classify(&HoldsDoc{Holds: []Hold{h, hold("w-other")}}, t0, steps)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].State != Open {
		t.Errorf("state %s, want open: the lock was held when checked", got[0].State)
	}
	if calls != 1 {
		t.Errorf("steps called %d times, want once", calls)
	}
}

func TestHonoured(t *testing.T) {
	for st, want := range map[string]bool{Open: true, Overdue: true, Orphaned: true, Unknown: true, Stale: false, "": false} {
		if got := Honoured(st); got != want {
			t.Errorf("Honoured(%q) = %v, want %v", st, got, want)
		}
	}
}

// TestHelperHoldWindowLock is not a test: TestKilledWindowTurnsStale runs
// the test binary as a window process that holds a window lock until killed.
func TestHelperHoldWindowLock(t *testing.T) {
	dir, id := os.Getenv("HOLDS_TEST_DIR"), os.Getenv("HOLDS_TEST_ID")
	if dir == "" {
		t.Skip("helper process only")
	}
	d, err := state.Open(dir)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	if _, err := d.Lock(context.Background(), WindowLock(id), state.LockOptions{}); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// TestKilledWindowTurnsStale: a window process that dies by SIGKILL runs no
// cleanup at all, yet its hold reads stale at once, because the kernel drops
// the flock with the process.
func TestKilledWindowTurnsStale(t *testing.T) {
	d := openTemp(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldWindowLock$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOLDS_TEST_DIR="+d.Path(), "HOLDS_TEST_ID=w-child")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("helper: %q, %v", line, err)
	}

	stateOf := func(h Hold) (string, error) {
		c, _, err := Liveness{Dir: d}.Classify(&HoldsDoc{Holds: []Hold{h}}, t0, func() (func(string) bool, error) {
			return func(string) bool { return false }, nil
		})
		if err != nil {
			return "", err
		}
		return c[0].State, nil
	}
	h := hold("w-child")
	h.PID = cmd.Process.Pid
	if st, err := stateOf(h); err != nil || st != Open {
		t.Fatalf("while the window lives: %s, %v; want open", st, err)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if st, err := stateOf(h); err != nil || st != Stale {
		t.Fatalf("after SIGKILL: %s, %v; want stale", st, err)
	}
}

// TestClassifyAndReleaseStale: only stale holds are released, each into the
// history as "stale" naming the dead process; honoured ones stay.
func TestClassifyAndReleaseStale(t *testing.T) {
	d := openTemp(t)
	lockWindow(t, d, "w-open")
	lockWindow(t, d, "w-overdue")
	orphan := hold("w-orphan")
	orphan.Module, orphan.StepContainer = "other", "meshctl-window.other.gc"
	overdue := hold("w-overdue")
	overdue.Deadline = t0.Add(-time.Second)
	stale := hold("w-stale")
	stale.Module, stale.PID = "third", 777
	doc := &HoldsDoc{Holds: []Hold{hold("w-open"), overdue, orphan, stale}}

	live := Liveness{Dir: d}
	steps := func() (func(string) bool, error) {
		return func(n string) bool { return n == "meshctl-window.other.gc" }, nil
	}
	classified, _, err := live.Classify(doc, t0, steps)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, c := range classified {
		states = append(states, c.ID+"="+c.State)
	}
	want := []string{"w-open=open", "w-overdue=overdue", "w-orphan=orphaned", "w-stale=stale"}
	if !slices.Equal(states, want) {
		t.Fatalf("classified %v, want %v", states, want)
	}

	hist := &History{}
	now := t0.Add(5 * time.Minute)
	released := dropStale(doc, hist, classified, now)
	if len(released) != 1 || released[0].ID != "w-stale" {
		t.Fatalf("released %v, want w-stale only", released)
	}
	var left []string
	for _, h := range doc.Holds {
		left = append(left, h.ID)
	}
	if !slices.Equal(left, []string{"w-open", "w-overdue", "w-orphan"}) {
		t.Errorf("holds left %v", left)
	}
	if len(hist.Windows) != 1 {
		t.Fatalf("history %v", hist.Windows)
	}
	e := hist.Windows[0]
	if e.ID != "w-stale" || e.Module != "third" || e.Result != Stale || !e.ClosedAt.Equal(now) || !e.OpenedAt.Equal(t0) || e.StepExitCode != nil {
		t.Errorf("history entry %+v", e)
	}
	if !strings.Contains(e.Error, "777") {
		t.Errorf("history entry error %q does not name the dead process 777", e.Error)
	}

	// Released once: a second pass finds nothing more to release.
	classified, _, err = live.Classify(doc, now, steps)
	if err != nil {
		t.Fatal(err)
	}
	if again := dropStale(doc, hist, classified, now); len(again) != 0 {
		t.Errorf("released again: %v", again)
	}
}

// TestHistoryBounded keeps the newest HistoryLimit entries, oldest first.
func TestHistoryBounded(t *testing.T) {
	var h History
	for i := range HistoryLimit + 7 {
		h.Append(Entry{ID: fmt.Sprintf("w-%04d", i), Result: "ok"})
	}
	if len(h.Windows) != HistoryLimit {
		t.Fatalf("len = %d, want %d", len(h.Windows), HistoryLimit)
	}
	if first, last := h.Windows[0].ID, h.Windows[HistoryLimit-1].ID; first != "w-0007" || last != fmt.Sprintf("w-%04d", HistoryLimit+6) {
		t.Errorf("kept %s … %s", first, last)
	}
	for i := 1; i < len(h.Windows); i++ {
		if h.Windows[i-1].ID >= h.Windows[i].ID {
			t.Fatalf("out of order at %d: %s, %s", i, h.Windows[i-1].ID, h.Windows[i].ID)
		}
	}
}

// TestHistoryBoundedOnDisk: the bound holds through the state file, as apply
// and window write it.
func TestHistoryBoundedOnDisk(t *testing.T) {
	d := openTemp(t)
	n := 0
	for _, batch := range []int{HistoryLimit - 1, 4} {
		l, err := d.Lock(context.Background(), StateLock, state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var h History
		if _, err := l.Read(HistoryFile, &h); err != nil {
			t.Fatal(err)
		}
		for range batch {
			h.Append(Entry{ID: fmt.Sprintf("w-%04d", n)})
			n++
		}
		if err := l.Write(HistoryFile, &h); err != nil {
			t.Fatal(err)
		}
		l.Unlock()
	}
	var h History
	if _, err := d.Read(HistoryFile, &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Windows) != HistoryLimit || h.Windows[0].ID != "w-0003" || h.Windows[HistoryLimit-1].ID != fmt.Sprintf("w-%04d", n-1) {
		t.Fatalf("on disk: %d entries, %s … %s", len(h.Windows), h.Windows[0].ID, h.Windows[len(h.Windows)-1].ID)
	}
}

func TestDocFindDrop(t *testing.T) {
	doc := &HoldsDoc{Holds: []Hold{hold("w-a"), hold("w-b"), hold("w-c")}}
	if h, ok := doc.Find("w-b"); !ok || h.ID != "w-b" {
		t.Fatalf("Find(w-b) = %v, %v", h, ok)
	}
	doc.Drop("w-b")
	doc.Drop("w-nope")
	if _, ok := doc.Find("w-b"); ok {
		t.Fatal("w-b still there after Drop")
	}
	if len(doc.Holds) != 2 || doc.Holds[0].ID != "w-a" || doc.Holds[1].ID != "w-c" {
		t.Fatalf("holds %v", doc.Holds)
	}
}

func TestDescribe(t *testing.T) {
	v := ViewOf(hold("w-20260301T033002-abcdef"), Open)
	got := v.Describe()
	want := "window w-20260301T033002-abcdef store/garbage-collect open since " + state.When(t0) + ", holds store.registry"
	if got != want {
		t.Errorf("Describe() =\n%q, want\n%q", got, want)
	}
	v.State = Orphaned
	v.Containers = []string{"store.registry", "store.web"}
	if got := v.Describe(); !strings.Contains(got, "orphaned since") || !strings.Contains(got, "holds store.registry, store.web") || !strings.Contains(got, "step container still runs") {
		t.Errorf("orphaned Describe() = %q", got)
	}
}

// TestGroupRuns: a dead window's exec: step group runs while a process of
// it runs; a zombie (killed, not yet reaped) does not run, nor does a group
// that is gone.
func TestGroupRuns(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	if !groupRuns(pgid) {
		t.Fatal("a group whose process sleeps does not run")
	}
	h := Hold{StepGroup: pgid}
	if st := stateOf(h, false, nil, nil, time.Now()); st != Orphaned {
		t.Errorf("a dead window whose step group runs is %s, want %s", st, Orphaned)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Killed, not reaped: a zombie, until Wait.
	deadline := time.Now().Add(10 * time.Second)
	for groupRuns(pgid) {
		if time.Now().After(deadline) { // a hang guard, not a timing
			t.Fatal("a killed, unreaped process still runs after 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := stateOf(h, false, nil, nil, time.Now()); st != Stale {
		t.Errorf("a dead window whose step group is only a zombie is %s, want %s", st, Stale)
	}
	_ = cmd.Wait()
	if groupRuns(pgid) {
		t.Error("a group that is gone runs")
	}
}
