// Package fault names the kinds of failure meshctl's packages report. A typed
// error says its kind with a Fault method. Only pkg/cli maps each kind to an
// exit status (CONTRACT §3). So no other package knows those numbers.
package fault

import "fmt"

// Kind is a kind of failure, as the user acts on it.
type Kind string

// The kinds of failure. An error without a Kind is Failed.
const (
	// Failed is a failure of the work asked for. The engine refused or is
	// unreachable, a step failed, a container could not be converged, or the
	// etcd ledger did not answer.
	Failed Kind = "failed"
	// BadInput is bad usage or bad input. Examples are flags, a mesh file,
	// names or unknown ids. So are a state file that cannot be read and a
	// state directory refused.
	BadInput Kind = "bad input"
	// Busy is a lock not had in time, or a window open on the module.
	Busy Kind = "busy"
	// Conflict is a build recorded twice with different results.
	Conflict Kind = "conflict"
	// Interrupted is a command stopped by SIGINT or SIGTERM, after cleaning
	// up.
	Interrupted Kind = "interrupted"
)

// Error is a failure that carries only its kind and its message.
type Error struct {
	Kind Kind
	Msg  string
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg }

// Fault returns the kind.
func (e *Error) Fault() Kind { return e.Kind }

// New returns an *Error of the given kind, its message formatted as fmt.Sprintf does.
func New(kind Kind, format string, args ...any) error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
