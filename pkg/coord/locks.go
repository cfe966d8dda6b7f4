package coord

// The files the protocol keeps in the state directory. Each changes only
// under StateLock.
const (
	// HoldsFile records the open windows' holds.
	HoldsFile = "holds.json"
	// HistoryFile records the closed windows, oldest first.
	HistoryFile = "windows-history.json"
	// ClaimsFile records the claims of applies at work without the lock.
	ClaimsFile = "claims.json"
)

// StateLock is the lock that apply and a window's open and close take.
// Each OS lock is a file NAME.lock in the state directory.
const StateLock = "state"

// WindowLock is the OS lock a window's process holds for its whole life.
// A hold whose window lock is free belongs to a dead window.
func WindowLock(id string) string { return "window-" + id }

// ModuleLock is the OS lock that makes a window exclusive on its module.
func ModuleLock(module string) string { return "window-module-" + module }

// ClaimLock is the OS lock an apply holds for its claim's life.
// A claim whose lock is free belongs to a dead apply.
func ClaimLock(id string) string { return "claim-" + id }
