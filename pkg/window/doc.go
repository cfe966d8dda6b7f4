// Package window runs a maintenance step while it holds some of a module's
// containers stopped (CONTRACT §6).
//
// A window takes the state lock only to open and to close. Opening records
// the hold and stops the held containers. It sets their restart policy to
// "no", so an engine restart does not revive them. The step then runs with
// no lock held. An apply arriving mid-window is planned at once. It reads
// the hold and leaves the held containers alone. Closing, on every path,
// brings each held container to what the most recent apply wants. Then it
// drops the hold.
//
// Run and the resolving of the step are in window.go. open.go records the
// hold. The heal of dead applies and the release of dead windows belong to
// package coord, shared with apply. claims.go waits for an apply's claim.
// steprunner.go and stepexec.go run the step. An exec step runs as argv, a
// run step as a one-off container. ack.go acknowledges failed windows.
// close.go has bringBack and bringOne, which decide what a close starts.
// coord.BringBack decides how. list.go and logs.go serve window list and
// window logs.
package window
