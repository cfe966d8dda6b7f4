package faultproxy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// TestFaultProxyEngine runs meshctl's own engine client through the proxy
// against the test engine: a failed call reads as the engine's error, and
// a container's wait (a streamed answer) and logs pass through.
func TestFaultProxyEngine(t *testing.T) {
	host := enginetest.Host(t)
	p, err := Start(filepath.Join(t.TempDir(), "p.sock"), host, NewSchedule(7,
		Rule{Method: "GET", Route: "/containers/json", Nth: 1, Class: Fail}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := engine.New(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := c.List(ctx, map[string]string{"io.meshctl.module": "fltnone"}); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("first list: %v, want the injected failure", err)
	}
	if _, err := c.List(ctx, map[string]string{"io.meshctl.module": "fltnone"}); err != nil {
		t.Fatalf("second list: %v", err)
	}
	name := fmt.Sprintf("fltproxy%08x", rand.Uint32())
	id, err := c.Create(ctx, name, engine.Spec{Image: enginetest.Image, Cmd: []string{"sh", "-c", "echo hi; sleep 0.5; exit 3"}, NetworkMode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Remove(context.Background(), id)
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code, err := c.Wait(ctx, id); err != nil || code != 3 {
		t.Fatalf("wait through the proxy: %d %v, want 3", code, err)
	}
	var logs strings.Builder
	if err := c.Logs(ctx, id, &logs); err != nil || logs.String() != "hi\n" {
		t.Fatalf("logs through the proxy: %q %v", logs.String(), err)
	}
	if n := p.Counts(); n[Fail] != 1 {
		t.Fatalf("counts %v, want one fail", n)
	}
}
