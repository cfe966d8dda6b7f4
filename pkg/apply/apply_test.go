package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

const busybox = "meshtest/busybox:1"

// meshOf decodes a mesh file of module m, one container per entry of cs
// ("name: {image: …}" YAML flow maps).
func meshOf(t testing.TB, cs ...string) *mesh.File {
	t.Helper()
	var b strings.Builder
	b.WriteString("modules:\n  m:\n    containers:\n")
	for _, c := range cs {
		b.WriteString("      " + c + "\n")
	}
	f, err := mesh.Decode("mesh.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func stateDir(t testing.TB) *state.Dir {
	t.Helper()
	d, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func run(t testing.TB, d *state.Dir, eng engine.Client, f *mesh.File, mod func(*Options)) (*record.Report, error) {
	t.Helper()
	opts := Options{File: f, Source: "mesh.yaml", Parallel: 4}
	if mod != nil {
		mod(&opts)
	}
	return Run(context.Background(), d, eng, opts)
}

func actions(rep *record.Report) map[string]Action {
	out := map[string]Action{}
	for _, c := range rep.Containers {
		out[c.Name] = c.Action
	}
	return out
}

// TestRunNoOpCostsTwoCalls checks that a no-op apply asks the engine twice
// (ping, list), whatever the number of containers, and changes nothing.
func TestRunNoOpCostsTwoCalls(t *testing.T) {
	for _, n := range []int{1, 40, 400} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			var cs []string
			for i := range n {
				cs = append(cs, fmt.Sprintf("c%03d: {image: %s, env: {N: %q}}", i, busybox, fmt.Sprint(i)))
			}
			f, d, eng := meshOf(t, cs...), stateDir(t), enginetest.NewFake(busybox)
			if _, err := run(t, d, eng, f, nil); err != nil {
				t.Fatal(err)
			}
			eng.Changes()
			eng.ResetCalls()
			rep, err := run(t, d, eng, f, nil)
			if err != nil {
				t.Fatal(err)
			}
			if rep.EngineCalls != 2 || rep.Changed {
				t.Errorf("no-op apply: engine_calls %d, changed %v; want 2, false", rep.EngineCalls, rep.Changed)
			}
			for name, a := range actions(rep) {
				if a != Unchanged {
					t.Errorf("%s: %s, want unchanged", name, a)
				}
			}
			if c := eng.Changes(); len(c) > 0 {
				t.Errorf("no-op apply changed the engine: %q", c)
			}
		})
	}
}

// TestRecreateRollsBack checks that a recreate whose new container cannot
// be made puts the old one back as it was, and that one whose image is
// absent does not touch the old one at all.
func TestRecreateRollsBack(t *testing.T) {
	const bad = "meshtest/busybox:bad"
	for _, tt := range []struct {
		name       string
		oldStopped bool
		setup      func(f *enginetest.Fake)
		pull       string // pull policy of the new spec
		wantLog    []string
		wantErr    string
	}{
		{
			name:  "start fails",
			setup: func(f *enginetest.Fake) { f.AddImages(bad); f.FailStart(bad, true) },
			wantLog: []string{"create m.a.meshctl-new", "stop m.a", "start m.a.meshctl-new",
				"remove m.a.meshctl-new", "start m.a"},
			wantErr: "start new m.a",
		},
		{
			// The new one is made before the old one stops: a create that
			// fails leaves the old one running, untouched.
			name:    "create fails: the old one is not even stopped",
			setup:   func(f *enginetest.Fake) { f.AddImages(bad); f.FailCreate(bad, true) },
			wantLog: []string{"create m.a.meshctl-new"},
			wantErr: "create new m.a",
		},
		{
			name:       "start fails, old was stopped: it stays stopped",
			oldStopped: true,
			setup:      func(f *enginetest.Fake) { f.AddImages(bad); f.FailStart(bad, true) },
			wantLog:    []string{"create m.a.meshctl-new", "start m.a.meshctl-new", "remove m.a.meshctl-new"},
			wantErr:    "start new m.a",
		},
		{
			name:    "pull fails: the old one is not even stopped",
			setup:   func(f *enginetest.Fake) {},
			wantLog: []string{"pull " + bad},
			wantErr: "pull failed",
		},
		{
			name:    "missing with pull: never: nothing is asked",
			setup:   func(f *enginetest.Fake) {},
			pull:    "never",
			wantLog: nil,
			wantErr: "image missing and pull: never",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, eng := stateDir(t), enginetest.NewFake(busybox)
			good := meshOf(t, "a: {image: "+busybox+"}")
			if _, err := run(t, d, eng, good, nil); err != nil {
				t.Fatal(err)
			}
			if tt.oldStopped {
				eng.SetRunning("m.a", false)
			}
			before, _ := eng.Get("m.a")
			tt.setup(eng)
			eng.Changes()

			spec := "a: {image: " + bad
			if tt.pull != "" {
				spec += ", pull: " + tt.pull
			}
			rep, err := run(t, d, eng, meshOf(t, spec+"}"), nil)
			var failed *FailedError
			if !errors.As(err, &failed) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want a *FailedError saying %q", err, tt.wantErr)
			}
			if a := actions(rep)["m.a"]; a != Failed {
				t.Errorf("m.a: %s, want failed", a)
			}
			if got := eng.Changes(); !slices.Equal(got, tt.wantLog) {
				t.Errorf("engine requests:\n got  %q\n want %q", got, tt.wantLog)
			}
			after, ok := eng.Get("m.a")
			if !ok || after.ID != before.ID || after.Running != before.Running || after.Spec.Image != busybox {
				t.Fatalf("m.a after the failed recreate: %+v, want the old one back: %+v", after, before)
			}
			if _, ok := eng.Get(lifecycle.OldName("m.a")); ok {
				t.Errorf("%s left behind", lifecycle.OldName("m.a"))
			}
			if n := len(eng.Containers()); n != 1 {
				t.Errorf("%d containers left, want only the old one", n)
			}
			// The old one still carries its recorded spec: the good file finds it
			// unchanged (or, stopped, to be recreated).
			eng.FailStart(bad, false)
			eng.FailCreate(bad, false)
			rep, err = run(t, d, eng, good, func(o *Options) { o.DryRun = true })
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]Action{false: Unchanged, true: Recreate}[tt.oldStopped]; actions(rep)["m.a"] != want {
				t.Errorf("the good file then plans m.a: %s, want %s", actions(rep)["m.a"], want)
			}
		})
	}
}

// TestRunConflictChangesNothing checks that a name owned by a container
// meshctl does not manage fails the whole apply before any change.
func TestRunConflictChangesNothing(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, eng, meshOf(t, "a: {image: "+busybox+"}", "old: {image: "+busybox+"}"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Create(context.Background(), "m.b", engine.Spec{Image: busybox}); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	before, _ := os.ReadFile(d.Path() + "/" + record.AppliedFile)

	rep, err := run(t, d, eng, meshOf(t,
		"a: {image: "+busybox+", env: {FOO: x}}", "b: {image: "+busybox+"}", "c: {image: "+busybox+"}"),
		func(o *Options) { o.Prune = true })
	var conflict *ConflictError
	if !errors.As(err, &conflict) || !slices.Equal(conflict.Names, []string{"m.b"}) {
		t.Fatalf("err = %v, want a conflict on m.b", err)
	}
	if rep == nil || rep.Changed || actions(rep)["m.b"] != Conflict {
		t.Errorf("report = %+v, want m.b conflict and changed false", rep)
	}
	if c := eng.Changes(); len(c) > 0 {
		t.Errorf("a conflicting apply changed the engine: %q", c)
	}
	if now, _ := os.ReadFile(d.Path() + "/" + record.AppliedFile); string(now) != string(before) {
		t.Error("a conflicting apply rewrote " + record.AppliedFile)
	}
}

// TestRunPullsWithoutTheLock checks that a missing image is pulled while
// the state lock is free: a slow pull must not hold up a window.
func TestRunPullsWithoutTheLock(t *testing.T) {
	const img = "meshtest/new:1"
	d := stateDir(t)
	eng := &lockProbe{Fake: enginetest.NewFake(), d: d}
	eng.SetPullable(img, true)
	rep, err := run(t, d, eng, meshOf(t, "a: {image: "+img+"}"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !eng.pulled {
		t.Fatal("the image was not pulled")
	}
	if eng.lockedDuringPull {
		t.Error("the state lock was held during the pull")
	}
	if c, ok := eng.Get("m.a"); actions(rep)["m.a"] != Create || !ok || !c.Running {
		t.Errorf("m.a not created after the pull: %v", actions(rep))
	}
}

type lockProbe struct {
	*enginetest.Fake
	d                        *state.Dir
	pulled, lockedDuringPull bool
}

func (p *lockProbe) Pull(ctx context.Context, ref string, w io.Writer) error {
	held, err := p.d.Held(coord.StateLock)
	if err != nil {
		return err
	}
	p.pulled, p.lockedDuringPull = true, held
	return p.Fake.Pull(ctx, ref, w)
}

// TestRunDryRunChangesNothing checks that a dry run changes neither the
// engine nor a state file, and still reports what it would do.
func TestRunDryRunChangesNothing(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, eng, meshOf(t, "a: {image: "+busybox+"}", "b: {image: "+busybox+"}"), nil); err != nil {
		t.Fatal(err)
	}
	eng.SetRunning("m.b", false)
	eng.Changes()
	before := snapshot(t, d)
	rep, err := run(t, d, eng, meshOf(t, "a: {image: "+busybox+", env: {FOO: x}}", "b: {image: "+busybox+"}", "c: {image: meshtest/absent:1}"),
		func(o *Options) { o.DryRun = true })
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Action{"m.a": Recreate, "m.b": Recreate, "m.c": Create}
	if got := actions(rep); !maps.Equal(got, want) || !rep.Changed || !rep.DryRun {
		t.Errorf("dry run report: %v changed %v dry_run %v; want %v, true, true", got, rep.Changed, rep.DryRun, want)
	}
	if c := eng.Changes(); len(c) > 0 {
		t.Errorf("a dry run changed the engine: %q", c)
	}
	if after := snapshot(t, d); !maps.Equal(before, after) {
		t.Errorf("a dry run changed the state dir:\n before %v\n after  %v", before, after)
	}
}

// snapshot returns each state file (lock files aside) with its contents.
func snapshot(t testing.TB, d *state.Dir) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".lock") {
			out[e.Name()] = "(lock)"
			continue
		}
		b, err := os.ReadFile(d.Path() + "/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

// TestRecreateClearsLeftoverAside: a recreate that could not remove its
// old container leaves "m.a.meshctl-old" behind, stopped, with no claim;
// the next apply removes that leftover (it is ours, and m.a itself exists)
// before it plans, and its recreate of m.a does not fail at the rename.
// (A leftover under the aside name at the rename itself, where the heal
// may not touch it, goes there: moveAside, TestStartFirstClearsALeftoverRetiring.)
func TestRecreateClearsLeftoverAside(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake(busybox)
	if _, err := run(t, d, eng, meshOf(t, "a: {image: "+busybox+", command: [one]}"), nil); err != nil {
		t.Fatal(err)
	}
	// The leftover: a copy of m.a under the aside name, as a dead recreate
	// would have left it.
	a, _ := eng.Get("m.a")
	spec := a.Spec
	if _, err := eng.Create(context.Background(), "m.a.meshctl-old", spec); err != nil {
		t.Fatal(err)
	}
	eng.Changes()
	rep, err := run(t, d, eng, meshOf(t, "a: {image: "+busybox+", command: [two]}"), func(o *Options) { o.Prune = false })
	if err != nil {
		t.Fatalf("recreate with a leftover aside container: %v", err)
	}
	if got := rep.Containers[0]; got.Name != "m.a" || got.Action != Recreate {
		t.Fatalf("m.a: %+v", got)
	}
	want := []string{"remove m.a.meshctl-old", "create m.a.meshctl-new", "stop m.a", "start m.a.meshctl-new",
		"rename m.a m.a.meshctl-old", "rename m.a.meshctl-new m.a", "remove m.a.meshctl-old"}
	if got := eng.Changes(); !slices.Equal(got, want) {
		t.Fatalf("changes:\n got %q\nwant %q", got, want)
	}
}

// TestPullAlwaysRecreatesOnNewerImage: pull: always pulls on every apply
// (without the lock) and recreates a container whose tag now names another
// image; a dry run pulls nothing; a pull that fails with the image at hand
// runs what is at hand.
func TestPullAlwaysRecreatesOnNewerImage(t *testing.T) {
	d, eng := stateDir(t), enginetest.NewFake()
	eng.SetPullable(busybox, true)
	f := meshOf(t, "a: {image: "+busybox+", pull: always}")
	if rep, err := run(t, d, eng, f, nil); err != nil || rep.Containers[0].Action != Create {
		t.Fatalf("first apply: %v, %+v", err, rep)
	}
	if got := eng.Changes(); !slices.Equal(got, []string{"pull " + busybox, "create m.a", "start m.a"}) {
		t.Fatalf("first apply changes: %q", got)
	}

	// Same image upstream: pulled again, nothing else.
	rep, err := run(t, d, eng, f, nil)
	if err != nil || rep.Containers[0].Action != Unchanged {
		t.Fatalf("same image: %v, %+v", err, rep.Containers)
	}
	if got := eng.Changes(); !slices.Equal(got, []string{"pull " + busybox}) {
		t.Fatalf("same image changes: %q", got)
	}

	// The tag moved upstream: a dry run says so and pulls nothing.
	eng.SetPullID(busybox, "id:newer")
	rep, err = run(t, d, eng, f, func(o *Options) { o.DryRun = true })
	if err != nil || rep.Containers[0].Action != Unchanged {
		t.Fatalf("dry run before the pull: %v, %+v", err, rep.Containers)
	}
	if got := eng.Changes(); len(got) != 0 {
		t.Fatalf("dry run changed the engine: %q", got)
	}
	rep, err = run(t, d, eng, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Containers[0]; c.Action != Recreate || !slices.Equal(c.Reasons, []string{lifecycle.ReasonNewerPull}) {
		t.Fatalf("moved tag: %+v", c)
	}
	// The record says which image the pull gave: a window's close carries
	// out a newer pull an apply deferred.
	if a, _, err := record.LoadApplied(d); err != nil || a.Images["m.a"].PulledID != "id:newer" {
		t.Fatalf("applied.json images %+v, %v; want m.a pulled as id:newer", a.Images, err)
	}

	// The registry goes away: the image at hand still runs; nothing recreated.
	eng.SetPullable(busybox, false)
	eng.Changes()
	rep, err = run(t, d, eng, f, nil)
	if err != nil || rep.Containers[0].Action != Unchanged {
		t.Fatalf("registry away: %v, %+v", err, rep.Containers)
	}
}
