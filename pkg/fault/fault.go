// Package fault names the kinds of failure meshctl's packages report. A
// typed error says its kind with a Fault method; pkg/cli alone maps each kind
// to an exit status (CONTRACT §3), so no other package knows those numbers.
package fault

import "fmt"

// Kind is a kind of failure, as the user acts on it.
type Kind string

// The kinds of failure. An error without a Kind is Failed.
const (
	// Failed: the engine refused or is unreachable, a step failed, a
	// container could not be converged, the etcd ledger did not answer.
	Failed Kind = "failed"
	// BadInput: bad usage or bad input — flags, a mesh file, names, unknown
	// ids, a state file that cannot be read, a state directory refused.
	BadInput Kind = "bad input"
	// Busy: a lock not had in time, or a window open on the module.
	Busy Kind = "busy"
	// Conflict: a build recorded twice with different results.
	Conflict Kind = "conflict"
	// Interrupted: stopped by SIGINT or SIGTERM, after cleaning up.
	Interrupted Kind = "interrupted"
)

// Error is a failure that carries only its kind and its message.
// An error with nothing else to say needs no type of its own.
type Error struct {
	Kind Kind
	Msg  string
}

// New returns an *Error of kind with the message format makes of args.
func New(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string { return e.Msg }

// Fault returns the error's kind.
func (e *Error) Fault() Kind { return e.Kind }
