package status

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/ledger"
)

// oneGathering is a GatherStore that knows one gathering, started, run by
// host-b. Status only reads it.
type oneGathering struct {
	g     ledger.Gathering
	reads int
}

func (o *oneGathering) JoinGathering(context.Context, ledger.Join) (coord.Gathered, error) {
	return nil, errors.New("status joins nothing")
}

func (o *oneGathering) PreviewJoin(context.Context, ledger.Join) (ledger.JoinPreview, error) {
	return ledger.JoinPreview{}, errors.New("status joins nothing")
}

func (o *oneGathering) Gathering(context.Context, string) (ledger.Gathering, bool, error) {
	return ledger.Gathering{}, false, errors.New("status reads by id")
}

func (o *oneGathering) GatheringByID(_ context.Context, module, id string) (ledger.Gathering, bool, error) {
	o.reads++
	return o.g, module == o.g.Module && id == o.g.ID, nil
}

func (o *oneGathering) RecordEnd(context.Context, string, string, ledger.StepEnd) error {
	return errors.New("status records nothing")
}

func (o *oneGathering) Gatherings(context.Context) ([]ledger.Gathering, error) {
	return nil, errors.New("status lists no gathering")
}

// TestMeshHoldCheck: status --check on a host whose dead mesh window's
// hold stays names why and what to do. On a member, that is the runner's
// host and the command to run there. On the runner's host, it is the step
// container that still runs. With a file ledger, the hold stays unknown.
func TestMeshHoldCheck(t *testing.T) {
	const gid, step = "g-20260301T033000Z-abcdef", "meshctl-window.store.gc"
	for _, tc := range []struct {
		name   string
		runner bool
		store  bool
		state  string
		says   []string
	}{
		{"member", false, true, coord.Orphaned, []string{"step runs on host host-b", "meshctl apply --last on host host-b"}},
		{"runner, step runs", true, true, coord.Orphaned, []string{"still runs here", "docker stop " + step}},
		{"file ledger", false, false, coord.Unknown, []string{"without an etcd ledger", "--ledger etcd://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t, meshYAML)
			stepName := ""
			extra := []engine.Container{}
			if tc.runner {
				stepName = step
				extra = append(extra, fx.step(step, true))
			}
			h := fx.hold(t, false, "")
			h.StepContainer, h.Gathering, h.Runner = stepName, gid, "host-b"
			fx.write(t, coord.HoldsFile, &coord.HoldsDoc{Holds: []coord.Hold{h}})
			eng := &fakeEngine{containers: append([]engine.Container{fx.service("store.registry", false), fx.service("store.web", true)}, extra...)}
			store := &oneGathering{g: ledger.Gathering{Module: "store", Step: "gc", ID: gid, Runner: "host-b", State: ledger.GatherStarted}}
			m := coord.Mesh{Host: "host-a"}
			if tc.runner {
				m.Host = "host-b"
			}
			if tc.store {
				m.Gather = store
			}
			rep, err := Get(context.Background(), fx.d, eng, t0, fileLedger(fx.d), m)
			if err != nil {
				t.Fatal(err)
			}
			if states(rep)["store.registry"] != Held || len(rep.Windows) != 1 || rep.Windows[0].State != tc.state {
				t.Fatalf("states %v, windows %+v; want store.registry held, the window %s", states(rep), rep.Windows, tc.state)
			}
			var line string
			for _, p := range rep.Problems {
				if strings.Contains(p, h.ID) {
					line = p
				}
			}
			for _, s := range tc.says {
				if !strings.Contains(line, s) {
					t.Errorf("problem %q does not say %q (problems %q)", line, s, rep.Problems)
				}
			}
			if tc.runner && store.reads != 0 {
				t.Errorf("etcd read %d times for a step that runs here", store.reads)
			}
		})
	}
}
