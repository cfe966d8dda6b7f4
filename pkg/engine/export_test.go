package engine

import "time"

// SetCallTimeout sets callTimeout for a test; the returned func puts it back.
func SetCallTimeout(d time.Duration) func() {
	old := callTimeout
	callTimeout = d
	return func() { callTimeout = old }
}
