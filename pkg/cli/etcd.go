package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshctl/meshctl/pkg/ledger"
)

// etcdHelper is meshctl with the etcd client in. The release's meshctl is
// built without it (tag noetcd), since gRPC's, protobuf's and etcd's packages
// cost every command about 3 ms at start (docs/performance.md). Both are
// built from cmd/meshctl, and meshctl-etcd ships beside meshctl.
const etcdHelper = "meshctl-etcd"

// handOverToEtcd replaces this process by meshctl-etcd when --ledger names an
// etcd ledger and this build has no etcd client. It returns nil when there is
// nothing to hand over, else why it could not.
//
// It runs before any work. The pre-run has read only the flags, MESHCTL_* and
// the config file, and a completion calls it before it reads the ledger. So
// meshctl-etcd, given the same arguments and environment, does the whole
// command. A signal that comes before meshctl-etcd catches signals ends a
// command that had not begun.
func handOverToEtcd(env *Env) error {
	if ledger.EtcdClient {
		return nil
	}
	if cfg, err := ledger.ParseURL(env.Global.Ledger); err != nil || cfg == nil {
		return nil // a file ledger; a bad URL is checkLedger's
	}
	path, err := helperPath(etcdHelper)
	if err != nil {
		return err
	}
	err = syscall.Exec(path, append([]string{path}, env.args...), os.Environ())
	return fmt.Errorf("%s: %w", etcdHelper, err)
}

// needsNoLedger says whether cmd never reads the ledger, whatever --ledger
// says. It is carried out here, and needs no meshctl-etcd installed.
func needsNoLedger(cmd *cobra.Command) bool {
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	switch top.Name() {
	case "version", "help", "completion", "convert", "exit-codes", "mesh-file":
		return true
	}
	return false
}
