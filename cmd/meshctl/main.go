// Command meshctl runs the containers of one host of a mesh.
package main

import (
	"os"

	"github.com/meshctl/meshctl/pkg/cli"
)

func main() { os.Exit(cli.Main()) }
