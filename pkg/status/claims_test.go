package status

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestLiveClaimIsWorkInProgress checks that a deploy in progress is not a
// problem. An apply recreating store.web holds its claim. The old container
// waits aside, stopped, as store.web.meshctl-old. The new one is not yet the
// spec. Within the claim's bound, status --check finds nothing. Past it, the
// claim itself is the problem, and the containers are reported again.
func TestLiveClaimIsWorkInProgress(t *testing.T) {
	fx := newFixture(t, meshYAML)
	l, err := fx.d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim, err := coord.TakeClaim(l, coord.Claim{Containers: []string{"store.web"}}, t0)
	l.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(claim.Abandon)

	drifted := fx.drifted(t)
	old := fx.service("store.web", false)
	old.ID, old.Name = "id-old", "store.web.meshctl-old"
	containers := []engine.Container{fx.service("store.registry", true), drifted, old}

	rep := get(t, fx, &fakeEngine{containers: containers}, t0.Add(30*time.Second))
	if len(rep.Problems) != 0 {
		t.Errorf("a deploy in progress has problems: %q", rep.Problems)
	}
	if len(rep.Changing) != 1 || rep.Changing[0].Stuck || !rep.Changing[0].Deadline.After(t0.Add(time.Minute)) {
		t.Errorf("changing %+v", rep.Changing)
	}
	for _, c := range rep.Containers {
		if strings.HasPrefix(c.Name, "store.web") != c.Changing {
			t.Errorf("%s: changing %v", c.Name, c.Changing)
		}
	}
	if !strings.HasPrefix(rep.Summary, "working: apply (pid ") || !strings.Contains(rep.Summary, "changing store.web") {
		t.Errorf("summary %q", rep.Summary)
	}

	// An hour on, the same claim is past its bound.
	rep = get(t, fx, &fakeEngine{containers: containers}, t0.Add(time.Hour))
	text := strings.Join(rep.Problems, "\n")
	for _, want := range []string{"has been changing store.web since", "past its bound", "container store.web is drifted", "container store.web.meshctl-old is stopped"} {
		if !strings.Contains(text, want) {
			t.Errorf("problems past the bound lack %q:\n%s", want, text)
		}
	}
	if !rep.Changing[0].Stuck {
		t.Errorf("claim not stuck an hour on: %+v", rep.Changing[0])
	}
}
