package enginetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/pkg/engine"
)

// Proxied starts a fault proxy in front of the test engine. It returns the
// proxy and a client that talks through it. Both close when the test ends.
func Proxied(t testing.TB) (*faultproxy.Proxy, engine.Client) {
	t.Helper()
	host := Host(t)
	dir, err := os.MkdirTemp("", "mfp") // short: a socket path has a bound
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := faultproxy.Start(filepath.Join(dir, "p.sock"), host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	c, err := engine.New(p.Host())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}
