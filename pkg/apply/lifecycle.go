package apply

import (
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
)

// The container lifecycle lives in package lifecycle; these names keep
// apply's callers (window, status, the CLI) as they were.
type (
	Executor        = lifecycle.Executor
	Desired         = lifecycle.Desired
	HealthError     = lifecycle.HealthError
	DependencyError = lifecycle.DependencyError
)

const (
	LabelManaged   = lifecycle.LabelManaged
	LabelRole      = lifecycle.LabelRole
	LabelModule    = lifecycle.LabelModule
	LabelContainer = lifecycle.LabelContainer
	LabelSpec      = lifecycle.LabelSpec
	LabelBuild     = lifecycle.LabelBuild
	LabelWindow    = lifecycle.LabelWindow
	RoleService    = lifecycle.RoleService
	RoleStep       = lifecycle.RoleStep

	StopTimeout      = lifecycle.StopTimeout
	DefaultSettle    = lifecycle.DefaultSettle
	HealthHealthy    = lifecycle.HealthHealthy
	HealthRunning    = lifecycle.HealthRunning
	HealthUnhealthy  = lifecycle.HealthUnhealthy
	HealthExited     = lifecycle.HealthExited
	HealthRestarting = lifecycle.HealthRestarting
	HealthCompleted  = lifecycle.HealthCompleted
)

// IsService is lifecycle.IsService.
func IsService(c engine.Container, scope string) bool { return lifecycle.IsService(c, scope) }

// Managed is lifecycle.Managed.
func Managed(scope string) map[string]string { return lifecycle.Managed(scope) }

// StopTimeoutOf is lifecycle.StopTimeoutOf.
func StopTimeoutOf(c engine.Container) time.Duration { return lifecycle.StopTimeoutOf(c) }

// DependencyOrder is lifecycle.DependencyOrder.
func DependencyOrder(names []string, deps func(string) []string) []string {
	return lifecycle.DependencyOrder(names, deps)
}

func oldName(name string) string { return lifecycle.OldName(name) }
