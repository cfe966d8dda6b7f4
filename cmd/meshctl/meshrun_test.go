package main

import (
	"testing"

	"github.com/meshctl/meshctl/internal/meshrun"
)

// testEngine returns the test engine's address, or skips the test.
// Under CI=true a missing engine fails the test instead.
func testEngine(t *testing.T) string {
	t.Helper()
	return meshrun.TestEngine(t)
}

// meshctl is meshrun's runner under the names TestReadmeFirstRun uses.
// It can go once that test names meshrun's fields itself.
type meshctl struct {
	*meshrun.Meshctl
	dir, bin, state string
	env             []string
}

// newMeshctl returns a runner on the engine at host (meshrun.New).
func newMeshctl(t *testing.T, host string) *meshctl {
	t.Helper()
	r := meshrun.New(t, host)
	return &meshctl{Meshctl: r, dir: r.Dir, bin: r.Bin, state: r.State, env: r.Env}
}

// cleanupModule removes the module's containers now and when the test ends.
func (m *meshctl) cleanupModule(module string) { m.CleanupModule(module) }
