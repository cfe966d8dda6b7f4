package window

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

const pullAlwaysYAML = `
modules:
  pa:
    containers:
      web:
        image: img:1
        pull: always
    steps:
      gc:
        while-stopped: [web]
        exec: ["true"]
`

// recordPulled writes applied.json as an apply of f that pulled img:1 as
// id would.
func recordPulled(t *testing.T, d *state.Dir, id string) {
	t.Helper()
	f := decode(t, pullAlwaysYAML)
	l, err := d.Lock(context.Background(), coord.StateLock, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	a := &record.Applied{AppliedAt: time.Now().UTC(), Source: "mesh.yaml", File: f,
		Images: map[string]record.Resolved{"pa.web": {Image: "img:1", PulledID: id}}}
	if err := l.Write(record.AppliedFile, a); err != nil {
		t.Fatal(err)
	}
}

// TestCloseCarriesOutANewerPull: an apply mid-window pulled img:1, a
// pull: always image, and its tag now names another image: it deferred an
// "image (newer pull)" recreate of the held pa.web. The close carries it
// out: pa.web runs the newer image. The close's diff once
// ignored image ids, and started the same container again.
func TestCloseCarriesOutANewerPull(t *testing.T) {
	d := openTemp(t)
	eng := enginetest.NewFake("img:1")
	eng.SetPullable("img:1", true)
	applyFresh(t, d, eng, decode(t, pullAlwaysYAML))
	recordPulled(t, d, "id:img:1")
	ctx := context.Background()
	opened := func() {
		// The apply mid-window: its pull finds a newer image, and it records it.
		eng.SetPullID("img:1", "sha256:newer")
		if err := eng.Pull(ctx, "img:1", nil); err != nil {
			t.Error(err)
		}
		recordPulled(t, d, "sha256:newer")
		recordDeferred(t, d, "pa", "pa.web")
	}
	if _, err := Run(ctx, d, eng, Options{Module: "pa", Step: "gc", Opened: opened, Lock: state.LockOptions{Timeout: time.Minute}}); err != nil {
		t.Fatal(err)
	}
	c, ok := eng.Get("pa.web")
	if !ok || !c.Running || c.ImageID != "sha256:newer" {
		t.Errorf("pa.web after the window: %+v, want the newer pull running", c)
	}
}
