package ledger

import "fmt"

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

// ExitCode maps an unknown id to exit status 2.
func (e *UnknownError) ExitCode() int { return 2 }

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

// ExitCode maps a malformed image reference to exit status 2.
func (e *ImageError) ExitCode() int { return 2 }

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

// ExitCode maps a bad module name to exit status 2.
func (e *ModuleError) ExitCode() int { return 2 }

// NoCurrentError reports a module that has no current build (exit 2).
type NoCurrentError struct {
	Module string
}

func (e *NoCurrentError) Error() string {
	return fmt.Sprintf("module %s has no current build; record one with meshctl build record", e.Module)
}

// ExitCode maps a module without a current build to exit status 2.
func (e *NoCurrentError) ExitCode() int { return 2 }

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

// ExitCode maps a conflicting record to exit status 4.
func (e *ConflictError) ExitCode() int { return 4 }

// DamagedError reports a ledger that contradicts itself (exit 1): it is the
// ledger's answer, never retried as a cluster that did not answer.
type DamagedError struct{ Msg string }

func (e *DamagedError) Error() string { return e.Msg }

// ExitCode maps a damaged ledger to exit status 1.
func (e *DamagedError) ExitCode() int { return 1 }
