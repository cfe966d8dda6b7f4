package enginetest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// EnvHost is the environment variable naming the test engine.
const EnvHost = "MESHCTL_TEST_DOCKER_HOST"

// Image is the small image the test engine holds. It is busybox, with sh,
// sleep and echo.
const Image = "meshtest/busybox:1"

const noEngine = "no test engine: set " + EnvHost + " (scripts/engine.sh start)"

// Host returns the test engine's address after checking that it answers.
// Without one, it skips the test, or fails it when CI=true. CI must not pass
// by skipping.
func Host(t testing.TB) string {
	t.Helper()
	host := os.Getenv(EnvHost)
	if host == "" {
		missing(t, noEngine)
	}
	c, err := engine.New(host)
	if err != nil {
		missing(t, noEngine+": "+err.Error())
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		missing(t, noEngine+": "+err.Error())
	}
	return host
}

// Client returns a new client of the test engine, closed when the test ends.
// It has made no request yet, so its Calls start at 0.
func Client(t testing.TB) engine.Client {
	t.Helper()
	c, err := engine.New(Host(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// RequireImage fails the test when the test engine lacks ref, such as Image,
// which scripts/engine.sh provides. Outside CI it skips the test instead.
func RequireImage(t testing.TB, c engine.Client, ref string) {
	t.Helper()
	ok, err := c.ImagePresent(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		missing(t, "test engine "+c.Host()+" lacks image "+ref+" (scripts/engine.sh start builds it)")
	}
}

func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
