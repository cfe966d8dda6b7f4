// Command meshctl runs the containers of one host of a mesh. The release
// builds it twice: as meshctl with -tags noetcd, which has no etcd client,
// and as meshctl-etcd, which meshctl becomes for a command given an etcd
// ledger (pkg/cli/etcd.go).
package main

import (
	"os"
	"runtime/debug"

	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/meshctl/meshctl/pkg/window"
)

func main() {
	window.MaybeStepGuard()
	tuneGC()
	os.Exit(cli.Main())
}

// A meshctl command is short-lived and small: at the Go default (GOGC
// 100) the collector ran several times in a no-op apply, for about a
// third of its CPU (docs/performance.md). It collects only near a soft
// memory limit, which keeps the peak under the 40 MiB target. A no-op
// apply at 1000 containers allocates 14 MB, and so never collects. GOGC
// and GOMEMLIMIT, when set, win.
const (
	gcPercent   = -1 // off but for the memory limit
	memoryLimit = 32 << 20
)

func tuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
}
