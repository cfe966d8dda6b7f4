package apply_test

import (
	"os"
	"testing"

	"github.com/meshctl/meshctl/pkg/window"
)

// TestMain runs this test binary as a step's guard when an exec: step of a
// window test starts it so.
func TestMain(m *testing.M) {
	window.MaybeStepGuard()
	os.Exit(m.Run())
}
