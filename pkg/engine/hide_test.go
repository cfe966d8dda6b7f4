package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// TestEngineWordsHideTheEnvironment: what the engine says of a container
// that meshctl prints or keeps (a refused start, the log tail, the probe's
// output) never quotes a value of its environment (runc's refusal of a
// NUL once echoed PW=S3CRET… into every report).
func TestEngineWordsHideTheEnvironment(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	const secret = "S3CRET-canary"

	id := create(t, c, prefix+"hide-start", engine.Spec{
		Image:       enginetest.Image,
		Cmd:         []string{"true"},
		Env:         []string{"PW=" + secret + "\x00tail"},
		NetworkMode: "none",
	})
	err := c.Start(ctx, id)
	if err == nil {
		t.Fatal("the engine started a container whose environment holds a NUL")
	}
	t.Logf("start: %v", err)
	if strings.Contains(err.Error(), secret) {
		t.Errorf("a refused start quotes the environment: %v", err)
	}

	id = create(t, c, prefix+"hide-tail", engine.Spec{
		Image:       enginetest.Image,
		Entrypoint:  []string{"/bin/sh", "-c"},
		Cmd:         []string{"echo pw is $PW; echo port ${PORT}"},
		Env:         []string{"PW=" + secret, "PORT=80"},
		NetworkMode: "none",
	})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, id); err != nil {
		t.Fatal(err)
	}
	tail, err := c.Tail(ctx, id, 10)
	if err != nil {
		t.Fatal(err)
	}
	if want := "pw is [value of PW]\nport 80\n"; tail != want {
		t.Errorf("tail: got %q, want %q", tail, want)
	}

	id = create(t, c, prefix+"hide-probe", engine.Spec{
		Image:       enginetest.Image,
		Cmd:         []string{"sleep", "300"},
		Env:         []string{"PW=" + secret},
		NetworkMode: "none",
		Healthcheck: &engine.Healthcheck{Test: []string{"CMD-SHELL", "echo probe $PW; exit 1"}, Interval: 100 * time.Millisecond, Timeout: 5 * time.Second, Retries: 1},
	})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Kill(context.Background(), id) })
	for {
		ct := inspect(t, c, id)
		if ct.HealthOutput != "" {
			if ct.HealthOutput != "probe [value of PW]" {
				t.Errorf("probe output: got %q, want %q", ct.HealthOutput, "probe [value of PW]")
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("no probe ran")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
