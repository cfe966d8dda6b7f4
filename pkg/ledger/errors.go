package ledger

import (
	"fmt"

	"github.com/meshctl/meshctl/pkg/fault"
)

// UnknownError reports a build or plan id the ledger never issued, or a
// malformed one (exit 2).
type UnknownError struct {
	Kind string // "build" or "plan"
	ID   string
	// Why is set for a malformed id.
	Why string
}

func (e *UnknownError) Error() string {
	if e.Why != "" {
		return e.Why
	}
	return fmt.Sprintf("unknown %s id %s: this ledger never issued it; check the id (meshctl build list shows recent ones)", e.Kind, e.ID)
}

// Fault says an unknown id is bad input.
func (e *UnknownError) Fault() fault.Kind { return fault.BadInput }

// ImageError reports an image reference that is not a Docker reference
// (exit 2).
type ImageError struct {
	Ref string
	Err error
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("image %q is not a valid image reference: %v; give NAME[:TAG]@sha256:DIGEST", e.Ref, e.Err)
}

func (e *ImageError) Unwrap() error { return e.Err }

// Fault says a malformed image reference is bad input.
func (e *ImageError) Fault() fault.Kind { return fault.BadInput }

// ModuleError reports a module name that does not match
// ^[a-z0-9][a-z0-9-]{0,62}$, or one named twice in a request (exit 2).
type ModuleError struct {
	Name string
	Why  string
}

func (e *ModuleError) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("module %q %s", e.Name, e.Why)
	}
	return fmt.Sprintf("module name %q is not valid: use 1 to 63 of a-z, 0-9 and '-', starting with a letter or digit", e.Name)
}

// Fault says a bad module name is bad input.
func (e *ModuleError) Fault() fault.Kind { return fault.BadInput }

// NoCurrentError reports a module that has no current build (exit 2).
type NoCurrentError struct {
	Module string
}

func (e *NoCurrentError) Error() string {
	return fmt.Sprintf("module %s has no current build; record one with meshctl build record", e.Module)
}

// Fault says a module without a current build is bad input.
func (e *NoCurrentError) Fault() fault.Kind { return fault.BadInput }

// ConflictError reports a build recorded again with another result: another
// image, or an image after a failure or the reverse (exit 4). The ledger is
// left untouched.
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

// DamagedError reports a ledger that contradicts itself (exit 1): it is the
// ledger's answer, never retried as a cluster that did not answer.
type DamagedError struct{ Msg string }

func (e *DamagedError) Error() string { return e.Msg }

// Fault says a damaged ledger is a failure.
func (e *DamagedError) Fault() fault.Kind { return fault.Failed }
