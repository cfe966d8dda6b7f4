package cli

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/meshctl/meshctl/pkg/ledger"
)

// etcdHelper is meshctl with the etcd client in. The release's meshctl is
// built without it (tag noetcd): gRPC, protobuf and etcd's packages would
// cost every command about 3 ms of initialisation and page faults, a fifth of
// a no-op apply at 40 containers (docs/performance.md). meshctl-etcd ships
// beside it and is built from the same source without the tag.
const etcdHelper = "meshctl-etcd"

// handOverToEtcd replaces this process by meshctl-etcd, with the same
// arguments and environment, when --ledger names an etcd ledger and this
// meshctl has no etcd client. It returns nil when there is nothing to hand
// over, and otherwise why it could not (meshctl-etcd missing: exit 1). It
// runs before any work: in the pre-run, which has read only flags,
// MESHCTL_* and the config file, and in a completion before it reads the
// ledger. meshctl-etcd reads them again and carries out the command; a
// signal before it is set to catch one ends it as it would end a meshctl
// that has not begun.
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
