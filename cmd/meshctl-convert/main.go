// Command meshctl-convert carries out `meshctl convert`, which meshctl runs
// it for: compose-go, which a conversion needs, stays out of meshctl itself,
// whose every command would otherwise pay for its package initialisation
// (docs/performance.md). It ships beside meshctl in the release archive.
// Run alone, it is meshctl with the converter in.
package main

import (
	"os"

	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/meshctl/meshctl/pkg/convert"
	"github.com/meshctl/meshctl/pkg/window"
)

func main() {
	window.MaybeStepGuard()
	cli.Converter = convert.Project
	os.Exit(cli.Main())
}
