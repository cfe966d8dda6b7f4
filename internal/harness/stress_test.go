package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// stressMesh is the mesh TestMixedStress applies: two modules, each with a
// service held by a short exec: step and one that is never held.
const stressMesh = `modules:
  MODA:
    containers:
      svc: &svc
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["trap 'exit 0' TERM; while :; do sleep 1 & wait; done"]
        restart: always
        network: none
      side: *svc
    steps:
      hold:
        while-stopped: [svc]
        exec: [sleep, "0.2"]
  MODB:
    containers:
      svc: *svc
      side: *svc
    steps:
      hold:
        while-stopped: [svc]
        exec: [sleep, "0.2"]
`

// stressBuild is one build as the stress run recorded it.
type stressBuild struct {
	id, module, image string
	failed            bool
}

// TestMixedStress runs applies, windows on two modules, build
// request/record loops and status at once against the real engine, each a
// separate meshctl process, then checks the invariants: every state file
// parses; every managed container runs, as no window is left to hold one;
// the ledger holds every record; each module's current build is its newest
// successful request. A short run in the suite; MESHCTL_STRESS=1 makes it
// ten times longer (give go test -timeout 30m).
func TestMixedStress(t *testing.T) {
	host := meshrun.TestEngine(t)
	rounds := 3
	if os.Getenv("MESHCTL_STRESS") == "1" {
		rounds = 30
	}
	m := newMeshctl(t, host)
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	modA, modB := "sa"+suffix, "sb"+suffix
	m.CleanupModule(modA)
	m.CleanupModule(modB)
	file := filepath.Join(m.Dir, "mesh.yaml")
	mesh := strings.NewReplacer("MODA", modA, "MODB", modB).Replace(stressMesh)
	if err := os.WriteFile(file, []byte(mesh), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := m.Run("apply", "-f", file); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out)
	}

	var (
		mu     sync.Mutex
		errs   []error
		builds []stressBuild
		counts = map[string]int{}
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, fmt.Errorf(format, args...))
	}
	count := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		counts[what]++
	}
	// run runs one meshctl command; ok lists the exit statuses it may have.
	run := func(ok []int, args ...string) (string, bool) {
		stdout, stderr, err := m.Run2(args...)
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			fail("meshctl %s: %v", strings.Join(args, " "), err)
			return stdout, false
		}
		if !slices.Contains(ok, code) {
			fail("meshctl %s: exit %d, want one of %v\n%s%s", strings.Join(args, " "), code, ok, stdout, stderr)
			return stdout, false
		}
		count(args[0])
		return stdout, code == 0
	}

	var wg sync.WaitGroup
	worker := func(n int, f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				f(i)
			}
		}()
	}
	// An apply finding a window open is done (0): it leaves the held
	// container alone.
	worker(2*rounds, func(int) { run([]int{0}, "apply", "-f", file) })
	for _, mod := range []string{modA, modB} {
		worker(2*rounds, func(int) { run([]int{0}, "window", "run", mod, "hold", "--wait", "1m") })
	}
	// Status reads everything without a lock: exit 0, or 1 while a
	// container reads stopped between a window's close and its start.
	worker(3*rounds, func(int) {
		out, _ := run([]int{0, 1}, "status", "-o", "json")
		if !json.Valid([]byte(out)) {
			fail("status -o json printed %q", out)
		}
	})
	// Builders: each requests a few builds of one of two ledger modules and
	// records them in a shuffled order, some failed: the slowest builder
	// must not decide which build is current.
	ledgerMods := []string{"la" + suffix, "lb" + suffix}
	for b := range 2 {
		worker(rounds, func(round int) {
			mod := ledgerMods[(b+round)%2]
			var mine []stressBuild
			for range 3 {
				out, ok := run([]int{0}, "build", "request", mod, "-o", "json")
				if !ok {
					continue
				}
				var doc struct {
					Builds []struct{ ID string } `json:"builds"`
				}
				if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Builds) != 1 {
					fail("build request -o json: %v: %q", err, out)
					continue
				}
				mine = append(mine, stressBuild{id: doc.Builds[0].ID, module: mod,
					image: fmt.Sprintf("meshtest/app:%d-%d", b, len(mine)), failed: rand.IntN(4) == 0})
			}
			rand.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
			for _, bd := range mine {
				args := []string{"build", "record", bd.id, "--image", bd.image}
				if bd.failed {
					args = []string{"build", "record", bd.id, "--failed", "--reason", "stress"}
				}
				if _, ok := run([]int{0}, args...); ok {
					mu.Lock()
					builds = append(builds, bd)
					mu.Unlock()
				}
			}
		})
	}
	// While they run: a managed container that reads stopped is held. Its
	// hold is in the holds file read just before the listing or just after
	// it, or its window closed in between (then it is in the history).
	done := make(chan struct{})
	samples, seenHeld := 0, 0
	var monitor sync.WaitGroup
	monitor.Add(1)
	go func() {
		defer monitor.Done()
		d, err := state.Open(m.State)
		if err != nil {
			fail("state dir: %v", err)
			return
		}
		for {
			select {
			case <-done:
				return
			default:
			}
			before, histBefore, err1 := coord.ReadHolds(d.Read)
			list, err2 := m.Eng.List(t.Context(), map[string]string{lifecycle.LabelRole: lifecycle.RoleService})
			after, histAfter, err3 := coord.ReadHolds(d.Read)
			if err := errors.Join(err1, err2, err3); err != nil {
				fail("sample: %v", err)
				return
			}
			samples++
			held := map[string]bool{}
			for _, doc := range []coord.HoldsDoc{before, after} {
				for _, h := range doc.Holds {
					for _, c := range h.Containers {
						held[c] = true
					}
				}
			}
			closed := map[string]bool{}
			for _, e := range histAfter.Windows {
				if !histBefore.Has(e.ID) {
					closed[e.Module] = true
				}
			}
			for _, c := range list {
				mod := c.Labels[lifecycle.LabelModule]
				if (mod != modA && mod != modB) || c.Running {
					continue
				}
				if !held[c.Name] && !closed[mod] {
					fail("%s reads %s and no window holds it", c.Name, c.State)
				}
				seenHeld++
			}
		}
	}()
	wg.Wait()
	close(done)
	monitor.Wait()
	t.Logf("the monitor sampled the engine %d times, and saw a held container stopped %d times", samples, seenHeld)
	for _, err := range errs {
		t.Error(err)
	}
	t.Logf("commands that ran: %v; builds recorded: %d", counts, len(builds))

	// Every state file parses, as the reader of each kind reads it.
	d, err := state.Open(m.State)
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(m.State, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var v struct {
			Version int `json:"version"`
		}
		if err := json.Unmarshal(data, &v); err != nil || v.Version != stateVersion(p) {
			t.Errorf("state file %s: version %d, %v", p, v.Version, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hd, hist, err := coord.ReadHolds(d.Read)
	if err != nil {
		t.Fatalf("holds: %v", err)
	}
	if _, _, err := record.LoadApplied(d); err != nil {
		t.Errorf("applied.json: %v", err)
	}
	var last record.LastReport
	if _, err := d.Read(record.ReportFile, &last); err != nil {
		t.Errorf("last-apply.json: %v", err)
	}
	for _, e := range hist.Windows {
		if e.Result != "ok" {
			t.Errorf("window %s on %s closed %s: %s", e.ID, e.Module, e.Result, e.Error)
		}
	}

	// No managed container is stopped without a live hold: every window
	// has closed, so none is held and every one runs.
	if len(hd.Holds) != 0 {
		t.Errorf("holds left after every window closed: %+v", hd.Holds)
	}
	for _, mod := range []string{modA, modB} {
		for _, c := range []string{"svc", "side"} {
			x := m.inspect(mod + "." + c)
			if x.State != "running" || x.RestartPolicy != "always" {
				t.Errorf("%s.%s is %s with restart policy %q, and no window holds it", mod, c, x.State, x.RestartPolicy)
			}
		}
	}

	// The ledger holds every record, and each module's current build is its
	// newest successful request (ids order requests).
	l := ledger.New(d)
	for _, mod := range ledgerMods {
		list, err := l.List(t.Context(), mod)
		if err != nil {
			t.Fatalf("build list %s: %v", mod, err)
		}
		byID := map[string]ledger.Build{}
		for _, b := range list {
			byID[b.ID] = b
		}
		var newest *stressBuild
		for i := range builds {
			bd := &builds[i]
			if bd.module != mod {
				continue
			}
			got, ok := byID[bd.id]
			switch {
			case !ok:
				t.Errorf("build %s of %s was recorded, the ledger does not list it", bd.id, mod)
				continue
			case bd.failed && got.State != ledger.StateFailed:
				t.Errorf("build %s was recorded failed, the ledger says %s", bd.id, got.State)
			case !bd.failed && (got.Image != bd.image || got.State == ledger.StateFailed || got.State == ledger.StatePending):
				t.Errorf("build %s was recorded with %s, the ledger says %s %s", bd.id, bd.image, got.State, got.Image)
			}
			if !bd.failed && (newest == nil || bd.id > newest.id) {
				newest = bd
			}
		}
		out, stderr, err := m.Run2("build", "current", mod, "-o", "json")
		if newest == nil {
			if err == nil {
				t.Errorf("%s has no successful build, build current says %s", mod, out)
			}
			continue
		}
		var cur struct{ ID, Image string }
		if err != nil || json.Unmarshal([]byte(out), &cur) != nil {
			t.Fatalf("build current %s: %v\n%s%s", mod, err, out, stderr)
		}
		if cur.ID != newest.id || cur.Image != newest.image {
			t.Errorf("%s's current build is %s (%s), its newest successful request is %s (%s)", mod, cur.ID, cur.Image, newest.id, newest.image)
		}
	}
}
