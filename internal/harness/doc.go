// Package harness holds the fault, kill, signal and stress tests of meshctl.
// They run meshctl as a real process against the test engine (meshrun).
// They are its own package so that go test runs them beside cmd/meshctl's
// scripts, not after them.
//
// TestFaults injects engine faults and signals through a proxy. It checks
// the engine's own events after every run (docs/faults.md).
// TestKillHealsInOneApply and TestKillRecreateHealsInOneApply kill a
// window or an apply at a random instant. One apply must then heal the
// host. TestSignalEndsCommand checks that a signal ends every command in
// bounded time. TestMixedStress runs commands of every kind at once.
// TestCanary checks that no secret reaches any output or state file.
package harness
