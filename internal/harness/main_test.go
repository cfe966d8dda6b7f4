package harness

import (
	"os"
	"testing"

	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the harness run meshctl as a real process. A command the
// harness runs as meshctl is this test binary, which then runs cli.Main.
// The exec: steps' guard needs nothing here: pkg/window's init serves it.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"meshctl": func() { os.Exit(cli.Main()) },
	})
}
