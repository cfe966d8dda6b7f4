package faultproxy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// OnTestEngine starts a proxy in front of the test engine. It returns the
// proxy and a client that talks through it. Both close when the test ends.
func OnTestEngine(t testing.TB) (*Proxy, engine.Client) {
	t.Helper()
	host := enginetest.Host(t)
	dir, err := os.MkdirTemp("", "mfp") // short: a socket path has a bound
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p, err := Start(filepath.Join(dir, "p.sock"), host, nil)
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
