package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
	"github.com/rogpeppe/go-internal/testscript"
)

// cmdCtrLogs prints what a container wrote to stdout and stderr:
// ctrlogs NAME [DUR]. It follows the logs until the container exits, or for
// DUR at most (default a minute), and prints what it had by then.
func cmdCtrLogs(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 || neg {
		ts.Fatalf("usage: ctrlogs NAME [DUR]")
	}
	d := time.Minute
	if len(args) > 1 {
		var err error
		d, err = time.ParseDuration(args[1])
		ts.Check(err)
	}
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
	ts.Check(err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var out lockedBuilder
	if err := c.Logs(ctx, args[0], &out); err != nil && ctx.Err() == nil {
		ts.Fatalf("ctrlogs %s: %v", args[0], err)
	}
	fmt.Fprint(ts.Stdout(), out.String())
}

// lockedBuilder is a strings.Builder that Logs may still write to while it
// is read: a request cut short by its context can race its last write.
type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// cmdOldCtr creates and starts the container MODULE.CONTAINER as an older
// meshctl would have: the labels of the state dir $MESHCTL_STATE_DIR, and
// SPEC (JSON, as that meshctl encoded it) as its recorded spec. The engine
// gets the image, command and network SPEC names; restart unless-stopped.
// oldctr MODULE.CONTAINER SPEC
func cmdOldCtr(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 || neg {
		ts.Fatalf("usage: oldctr MODULE.CONTAINER SPEC")
	}
	module, container, ok := strings.Cut(args[0], ".")
	if !ok {
		ts.Fatalf("oldctr: %s is not MODULE.CONTAINER", args[0])
	}
	spec, err := mesh.DecodeSpec(args[1])
	ts.Check(err)
	d, err := state.Open(ts.Getenv("MESHCTL_STATE_DIR"))
	ts.Check(err)
	id, err := d.ID()
	ts.Check(err)
	c, err := engine.New(ts.Getenv("MESHCTL_TEST_DOCKER_HOST"))
	ts.Check(err)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cid, err := c.Create(ctx, args[0], engine.Spec{
		Image:       spec.Image,
		Entrypoint:  spec.Entrypoint,
		Cmd:         spec.Command,
		NetworkMode: spec.Network,
		Restart:     mesh.DefaultRestart,
		Labels: map[string]string{
			lifecycle.LabelManaged:   id,
			lifecycle.LabelRole:      lifecycle.RoleService,
			lifecycle.LabelModule:    module,
			lifecycle.LabelContainer: container,
			lifecycle.LabelSpec:      args[1],
		},
	})
	ts.Check(err)
	ts.Check(c.Start(ctx, cid))
}
