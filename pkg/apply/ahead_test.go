package apply

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// held reports whether some process holds d's state lock.
func held(t *testing.T, d *state.Dir) bool {
	t.Helper()
	h, err := d.Held(coord.StateLock)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// startAhead applies f once, then starts an Ahead for its next apply on
// an engine that sent its ping ahead, and waits for it to take what it
// takes.
func startAhead(t *testing.T, d *state.Dir, eng engine.Client, fake *enginetest.Fake, f string) (*Ahead, engine.Client) {
	t.Helper()
	if _, err := run(t, d, fake, meshOf(t, f), nil); err != nil {
		t.Fatal(err)
	}
	fake.Changes()
	fake.ResetCalls()
	p := engine.PingAhead(context.Background(), eng)
	h := StartAhead(context.Background(), d, p, state.LockOptions{})
	<-h.ready
	return h, p
}

// TestAheadListsUnderTheLockAndTheFirstPassUsesBoth checks that the list
// is asked for as the command starts, under the state lock, and that Run's
// pass takes that lock and list: the apply is still two requests.
func TestAheadListsUnderTheLockAndTheFirstPassUsesBoth(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	h, p := startAhead(t, d, fake, fake, "a: {image: "+busybox+"}")
	if h.lock == nil || h.list == nil {
		t.Fatal("the Ahead took no lock or list with the lock free and the engine answering")
	}
	if !held(t, d) {
		t.Fatal("the list was asked for without the state lock")
	}
	<-h.list.done
	if n := fake.Calls(); n != 2 {
		t.Fatalf("before Run: %d requests, want the ping and the list", n)
	}
	rep, err := run(t, d, p, meshOf(t, "a: {image: "+busybox+"}"), func(o *Options) { o.Ahead = h })
	if err != nil || rep.Changed {
		t.Fatalf("apply with the Ahead: changed %v, err %v", rep != nil && rep.Changed, err)
	}
	if rep.EngineCalls != 2 {
		t.Errorf("apply with the Ahead made %d requests in all, want 2: its pass listed again", rep.EngineCalls)
	}
	if held(t, d) {
		t.Error("the state lock is still held after Run")
	}
}

// TestAheadTakesNothingWhenTheLockIsBusy checks that a busy lock is left
// to the pass, which waits for it as before.
func TestAheadTakesNothingWhenTheLockIsBusy(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, fake, meshOf(t, "a: {image: "+busybox+"}"), nil); err != nil {
		t.Fatal(err)
	}
	other, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fake.ResetCalls()
	p := engine.PingAhead(context.Background(), fake)
	// The command's own lock options wait long: the Ahead must not.
	h := StartAhead(context.Background(), d, p, state.LockOptions{Timeout: time.Hour})
	<-h.ready
	if h.lock != nil || h.list != nil {
		t.Fatal("the Ahead took a lock another process holds, or listed without it")
	}
	if n := fake.Calls(); n != 1 {
		t.Fatalf("%d requests with the lock busy, want the ping alone", n)
	}
	other.Unlock()
	rep, err := run(t, d, p, meshOf(t, "a: {image: "+busybox+"}"), func(o *Options) { o.Ahead = h })
	if err != nil || rep.EngineCalls != 2 {
		t.Fatalf("apply after a busy Ahead: %v, %d requests; want a no-op of 2", err, rep.EngineCalls)
	}
}

// failingPing is an engine whose ping is refused.
type failingPing struct{ *enginetest.Fake }

func (failingPing) Ping(context.Context) error { return errors.New("engine refused") }

// TestAheadTakesNothingFromAnEngineThatDoesNotAnswer checks that without
// a good ping answer the state directory is left alone: no lock, no list.
func TestAheadTakesNothingFromAnEngineThatDoesNotAnswer(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	h, _ := startAhead(t, d, failingPing{fake}, fake, "a: {image: "+busybox+"}")
	if h.lock != nil || h.list != nil || held(t, d) {
		t.Fatal("the Ahead took the lock or listed though the ping was refused")
	}
	if n := fake.Calls(); n != 0 {
		t.Fatalf("%d requests reached the engine after a refused ping, want none", n)
	}
}

// TestAheadDroppedWhereThePassMayNotUseIt checks that Run releases a lock
// taken ahead before it pulls a `pull: always` image: no pull runs under
// the state lock.
func TestAheadDroppedWhereThePassMayNotUseIt(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	fake.SetPullable(busybox, true)
	f := "a: {image: " + busybox + ", pull: always}"
	h, p := startAhead(t, d, fake, fake, f)
	if h.lock == nil {
		t.Fatal("the Ahead took no lock")
	}
	lockedPull := false
	fake.Hook = func(op, _ string) {
		if op == enginetest.OpPull && held(t, d) {
			lockedPull = true
		}
	}
	if _, err := run(t, d, p, meshOf(t, f), func(o *Options) { o.Ahead = h }); err != nil {
		t.Fatal(err)
	}
	if lockedPull {
		t.Error("a pull: always image was pulled under the state lock taken ahead")
	}
}

// TestAheadDropReleasesTheLock checks Drop: the lock is free again, and a
// second Drop does nothing.
func TestAheadDropReleasesTheLock(t *testing.T) {
	d, fake := stateDir(t), enginetest.NewFake(busybox)
	h, _ := startAhead(t, d, fake, fake, "a: {image: "+busybox+"}")
	if !held(t, d) {
		t.Fatal("the Ahead holds no lock")
	}
	h.Drop()
	h.Drop()
	if held(t, d) {
		t.Fatal("the state lock is held after Drop")
	}
}

// TestAheadRecordedForFilesThatMayListAhead checks the decode cache's
// entry: an apply of a plain file says the next one may list ahead; one of
// a file with a `pull: always` container or a step's own image does not.
func TestAheadRecordedForFilesThatMayListAhead(t *testing.T) {
	for name, tc := range map[string]struct {
		data  string
		ahead bool
	}{
		"plain":       {"modules:\n  m:\n    containers:\n      a: {image: " + busybox + "}\n", true},
		"pull always": {"modules:\n  m:\n    containers:\n      a: {image: " + busybox + ", pull: always}\n", false},
		"step image": {"modules:\n  m:\n    containers:\n      a: {image: " + busybox + "}\n    steps:\n      gc:\n" +
			"        while-stopped: [a]\n        run: {image: " + busybox + ", command: [true]}\n", false},
	} {
		t.Run(name, func(t *testing.T) {
			d, fake := stateDir(t), enginetest.NewFake(busybox)
			fake.SetPullable(busybox, true)
			in := cachedSource(t, 0)
			in.Src.Data = []byte(tc.data)
			if _, _, err := applyCached(t, d, fake, in); err != nil {
				t.Fatal(err)
			}
			if got := record.ListsAhead(d, in); got != tc.ahead {
				t.Fatalf("ListsAhead after an apply = %v, want %v", got, tc.ahead)
			}
		})
	}
}
