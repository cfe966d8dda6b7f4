package apply

import (
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/record"
)

// TestRunResolvesArtifactAfterPull: artifact: is resolved where the plan is
// made, under the state lock, and so again after every pull. Here the build
// the first plan resolved (b1, meshtest/app:1) is missing and pulled; while
// that pull runs, a newer build (b2, meshtest/app:2, at hand) is recorded
// and applied. The apply must create web from b2 and record b2: creating
// it from b1, resolved before the pull, would roll the service back to an
// older build than the one just recorded, and applied.json with it (the
// build a window's close brings back).
func TestRunResolvesArtifactAfterPull(t *testing.T) {
	const (
		older = "meshtest/app:1"
		newer = "meshtest/app:2"
	)
	f, err := mesh.Decode("mesh.yaml", []byte("modules:\n  app:\n    containers:\n      web: {artifact: app}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d, eng := stateDir(t), enginetest.NewFake(newer)
	eng.SetPullable(older, true)

	var mu sync.Mutex
	image, build := older, "b1"
	resolve := func(module string) (string, string, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return image, build, module == "app", nil
	}

	// The pull of b1's image blocks until the test lets it go.
	pulling, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	eng.Hook = func(op, target string) {
		if op == enginetest.OpPull && target == older {
			once.Do(func() { close(pulling) })
			<-release
		}
	}
	type result struct {
		rep *record.Report
		err error
	}
	done := make(chan result, 1)
	go func() {
		rep, err := Run(t.Context(), d, eng, Options{File: f, Source: "mesh.yaml", Parallel: 4, Resolve: resolve})
		done <- result{rep, err}
	}()
	select {
	case <-pulling:
	case r := <-done:
		t.Fatalf("the apply ended (%v) without pulling %s", r.err, older)
	case <-time.After(10 * time.Second):
		t.Fatalf("the apply did not pull %s within 10s", older)
	}

	// Meanwhile build b2 is recorded: its image is at hand.
	mu.Lock()
	image, build = newer, "b2"
	mu.Unlock()
	close(release)

	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the apply did not end within 10s of the pull")
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.rep.Containers) != 1 {
		t.Fatalf("report %+v, want app.web alone", r.rep.Containers)
	}
	if c := r.rep.Containers[0]; c.Name != "app.web" || c.Action != Create || c.Build != "b2" {
		t.Errorf("report: %s %s build %q, want app.web create build b2", c.Name, c.Action, c.Build)
	}
	web, ok := eng.Get("app.web")
	if !ok || web.Spec.Image != newer || web.Spec.Labels[lifecycle.LabelBuild] != "b2" || !web.Running {
		t.Errorf("app.web in the engine: %+v, want it running %s, build b2", web, newer)
	}
	for _, e := range eng.Events() {
		if e.Op == enginetest.OpCreate && e.Image != newer {
			t.Errorf("event %d: %s from %s, resolved before the pull", e.Seq, e, e.Image)
		}
	}
	a, ok, err := record.LoadApplied(d)
	if err != nil || !ok {
		t.Fatalf("applied.json: ok %v, %v", ok, err)
	}
	if got, want := a.Images["app.web"], (record.Resolved{Image: newer, Build: "b2"}); got != want {
		t.Errorf("applied.json records app.web as %+v, want %+v", got, want)
	}
}
