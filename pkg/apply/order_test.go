package apply

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
)

// TestRunFollowsDependsOn: with room to run everything at once, app
// (depends-on db) is created only once db is started and healthy, while
// cache (independent) does not wait for db.
func TestRunFollowsDependsOn(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake(busybox, "db:1")
	f.Hook = func(op, target string) {
		// db's start is slow: whatever does not wait for it goes first.
		if op == enginetest.OpStart && target == "m.db" {
			time.Sleep(100 * time.Millisecond)
		}
	}
	rep, err := run(t, d, f, meshOf(t,
		"app: {image: "+busybox+", depends-on: [db]}",
		"cache: {image: "+busybox+"}",
		"db: {image: db:1}",
	), nil)
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, e := range f.Events() {
		seq = append(seq, e.String())
	}
	at := func(ev string) int {
		i := slices.Index(seq, ev)
		if i < 0 {
			t.Fatalf("no %q in %q", ev, seq)
		}
		return i
	}
	if at("create m.app") < at("start m.db") {
		t.Errorf("app created before db started: %q", seq)
	}
	if at("start m.cache") > at("start m.db") {
		t.Errorf("cache waited for db: %q", seq)
	}
	if a := actions(rep); a["m.app"] != Create || a["m.db"] != Create {
		t.Errorf("actions = %v", a)
	}
}

// TestRunDependencyFailedLeavesDependent: db's create fails, so app, which
// depends on it, is not touched and says why; cache is created.
func TestRunDependencyFailedLeavesDependent(t *testing.T) {
	d := stateDir(t)
	f := enginetest.NewFake(busybox, "db:1")
	f.FailStart("db:1", true)
	rep, err := run(t, d, f, meshOf(t,
		"app: {image: "+busybox+", depends-on: [db]}",
		"cache: {image: "+busybox+"}",
		"db: {image: db:1}",
	), nil)
	var fe *FailedError
	if !errors.As(err, &fe) {
		t.Fatalf("Run = %v, want a failed apply", err)
	}
	for _, c := range rep.Containers {
		switch c.Name {
		case "m.app":
			if c.Action != Failed || c.Error != "not touched: dependency m.db failed" {
				t.Errorf("app = %+v, want failed: dependency m.db failed, not touched", c)
			}
		case "m.cache":
			if c.Action != Create {
				t.Errorf("cache = %+v, want created", c)
			}
		}
	}
	if _, ok := f.Get("m.app"); ok {
		t.Errorf("m.app was created")
	}
	for _, e := range f.Events() {
		if e.Name == "m.app" {
			t.Errorf("m.app was touched: %s", e)
		}
	}
}
