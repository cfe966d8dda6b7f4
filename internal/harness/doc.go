// Package harness holds the fault, kill, signal and stress tests of meshctl.
// They run meshctl as a real process against the test engine (meshrun).
// They are its own package so that go test runs them beside cmd/meshctl's
// scripts, not after them.
//
// TestFaults injects engine faults and signals through a proxy. It checks
// the engine's own events after every run (docs/dev/faults.md). Its
// short run draws the doors faults land at from testdata/doors.json.
// TestKillHealsInOneApply and TestKillRecreateHealsInOneApply kill a
// window or an apply at a random instant. One apply must then heal the
// host. TestSignalEndsCommand checks that a signal ends every command in
// bounded time. TestMixedStress runs commands of every kind at once.
// TestCanary checks that no secret reaches any output or state file.
//
// The mesh scenarios (TestMesh*) run a mesh: all window over the host
// engines of scripts/hosts.sh and one etcd. They kill one of its
// processes, cut a host off etcd, fail a host's engine calls or kill the
// etcd leader. Each host's next apply must then heal the mesh
// (docs/dev/faults.md, "Mesh scenarios").
package harness
