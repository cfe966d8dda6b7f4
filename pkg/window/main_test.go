package window

import (
	"os"
	"testing"
)

// TestMain runs this test binary as a step's guard when an exec: step
// starts it so.
func TestMain(m *testing.M) {
	MaybeStepGuard()
	os.Exit(m.Run())
}
