// Package window runs a maintenance step while it holds some of a module's
// containers stopped (CONTRACT §6).
//
// A window takes the state lock only to open and to close. Opening records
// the hold, stops the held containers and sets their restart policy to "no"
// (an engine restart must not revive them); the step then runs with no lock
// held, so an apply arriving mid-window is planned at once and, reading the
// hold, leaves the held containers alone. Closing, on every path, brings each
// held container to what the most recent apply wants and drops the hold.
//
// The files: window.go (Run, resolving the step), open.go (recording the
// hold: the heal of dead applies and the release of dead windows are
// package coord's, shared with apply), claims.go (waiting for an apply's
// claim), steprunner.go and stepexec.go
// (the step runner: an exec: step as argv, a run: step as a one-off
// container), ack.go (acknowledging failed windows), close.go
// (bringBack and bringOne: what a close starts; coord.BringBack: how),
// list.go and
// logs.go (window list and window logs).
package window
