// Command etcd is a test tool: a current etcd server built from the Go module
// proxy, so that scripts/etcd.sh needs no distribution package.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
