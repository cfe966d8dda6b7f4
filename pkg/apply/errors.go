package apply

import (
	"errors"
	"fmt"
	"strings"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// ConflictError is an apply refused before any change, because an
// unmanaged container has a name the file wants (exit 1).
type ConflictError struct {
	Names []string
	// Owners maps a name to the ID of the other state directory whose
	// container has it. A name not in it is a container meshctl does not
	// manage.
	Owners map[string]string
}

func (e *ConflictError) Error() string {
	var unmanaged, msgs []string
	for _, n := range e.Names {
		if owner := e.Owners[n]; owner != "" {
			msgs = append(msgs, ConflictReason(n, owner))
		} else {
			unmanaged = append(unmanaged, n)
		}
	}
	if len(unmanaged) > 0 {
		msgs = append([]string{fmt.Sprintf("%s already exist and meshctl does not manage them; rename or remove them, or rename the containers in the mesh file",
			strings.Join(unmanaged, ", "))}, msgs...)
	}
	return "nothing changed: " + strings.Join(msgs, "; ")
}

// ErrStaleDecode is an apply whose cached decode (Options.Cached) came from
// an applied.json that changed before the state lock was had. Nothing was
// changed. The caller decodes the file and applies again.
var ErrStaleDecode = errors.New("the cached decode of the mesh file is stale")

// nothingApplied is an apply --last before anything was applied (exit 2).
func nothingApplied(dir string) error {
	return fault.New(fault.BadInput, "nothing was applied in %s yet, so there is no last applied state: run meshctl apply -f FILE", dir)
}

// unknownModule is a --remove-module of a module this state directory
// never applied and has no containers of (exit 2).
func unknownModule(module string, applied []string) error {
	msg := fmt.Sprintf("module %q was never applied here and has no containers", module)
	if s := mesh.Suggest(module, applied); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	if len(applied) > 0 {
		msg += " (applied modules: " + strings.Join(applied, ", ") + ")"
	}
	return fault.New(fault.BadInput, "%s", msg)
}

// heldModule is a --remove-module of a module a live window holds (exit 3).
// Held containers are never touched, so the module waits for the close.
func heldModule(module, window string) error {
	return fault.New(fault.Busy, "nothing changed: module %s is held by window %s; remove it once the window has closed", module, window)
}

// Fault says a conflict is a failure.
func (e *ConflictError) Fault() fault.Kind { return fault.Failed }

// FailedError is an apply in which some containers could not be converged
// (exit 1). The report says which. Err joins their errors.
type FailedError struct{ Err error }

func (e *FailedError) Error() string { return e.Err.Error() }
func (e *FailedError) Unwrap() error { return e.Err }

// Fault says a failed apply is a failure.
func (e *FailedError) Fault() fault.Kind { return fault.Failed }

// NetworkConflictError is an apply refused before any change (exit 1). A
// network has the name of a module network it would create, and meshctl
// did not create it. If another state directory did, Owner is its ID.
type NetworkConflictError struct{ Name, Owner string }

func (e *NetworkConflictError) Error() string {
	if e.Owner != "" {
		return "nothing changed: network " + e.Name + " is managed by another meshctl state directory (id " + e.Owner + "); check --state-dir, or rename the network in the mesh file"
	}
	return "nothing changed: a network meshctl did not create is named " + e.Name +
		"; remove or rename it, declare it external (networks: {NAME: {external: " + e.Name + "}}), or rename the network in the mesh file"
}

// ChangedNetworkError is a module network whose definition the file
// changes while a container apply cannot take off it is attached. Why
// says which container, and what to do. Nothing changed (exit 1).
type ChangedNetworkError struct{ Name, Module, Change, Why string }

func (e *ChangedNetworkError) Error() string {
	return fmt.Sprintf("nothing changed: network %s of module %s changed (%s), which the engine can change only by making it again; %s",
		e.Name, e.Module, e.Change, e.Why)
}

// missingJoin is a container that joins a network that does not exist.
// This apply does not create it either (exit 2).
func missingJoin(container, network, hint string) error {
	return fault.New(fault.BadInput, "nothing changed: %s joins network %s, which does not exist; %s", container, network, hint)
}
