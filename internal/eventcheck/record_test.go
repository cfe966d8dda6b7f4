package eventcheck

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// TestRecordEngine records a real engine's events while two copies of one
// service run at once, and finds them.
func TestRecordEngine(t *testing.T) {
	host := enginetest.Host(t)
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	module := fmt.Sprintf("fltrec%08x", rand.Uint32())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	rec, err := Record(ctx, host, func(name string, _ map[string]string) bool { return strings.HasPrefix(name, module) })
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Stop()
	labels := map[string]string{labelModule: module, labelContainer: "a"}
	for _, name := range []string{module + ".a", module + ".a" + asideSuffix} {
		id, err := c.Create(ctx, name, engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "30"}, NetworkMode: "none", Labels: labels})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Remove(context.Background(), id)
		if err := c.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Sync(ctx, enginetest.Image); err != nil {
		t.Fatal(err)
	}
	v := TwoRunning(Intervals(rec.Events()))
	if len(v) != 1 || !strings.Contains(v[0].Detail, module+".a") {
		t.Fatalf("violations %v, want the two copies of %s.a", v, module)
	}
}
