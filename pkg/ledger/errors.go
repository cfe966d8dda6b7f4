package ledger

import (
	"fmt"

	"github.com/meshctl/meshctl/pkg/fault"
)

// unknownID reports a build or plan id the ledger never issued (exit 2).
func unknownID(kind, id string) error {
	return fault.New(fault.BadInput, "unknown %s id %s: this ledger never issued it; check the id (meshctl build list shows recent ones)", kind, id)
}

// badImage reports an image reference that is not a Docker reference (exit 2).
func badImage(ref string, err error) error {
	return fault.New(fault.BadInput, "image %q is not a valid image reference: %v; give NAME[:TAG]@sha256:DIGEST", ref, err)
}

// NoCurrentError reports a module that has no current build (exit 2).
type NoCurrentError struct {
	Module string
}

func (e *NoCurrentError) Error() string {
	return fmt.Sprintf("module %s has no current build; record one with meshctl build record", e.Module)
}

// Fault says a module without a current build is bad input.
func (e *NoCurrentError) Fault() fault.Kind { return fault.BadInput }

// ConflictError reports a build recorded again with another result (exit 4).
// That is another image, or an image after a failure, or the reverse. The
// ledger is left untouched.
type ConflictError struct {
	ID       string
	Module   string
	Recorded string // the recorded result: an image, or "failed"
	New      string // the result asked for now
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("build %s of module %s is already recorded as %s, not %s; the ledger is unchanged: request a new build to record another result",
		e.ID, e.Module, e.Recorded, e.New)
}

// Fault says a conflicting record is a conflict.
func (e *ConflictError) Fault() fault.Kind { return fault.Conflict }
