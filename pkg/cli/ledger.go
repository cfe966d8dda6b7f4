package cli

import (
	"os"
	"time"

	"github.com/meshctl/meshctl/pkg/lazyre"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/state"
)

// The etcd ledger's credentials come from the environment only. They are
// never a flag, which shows in ps, nor a config key, since a config file
// gets copied. They are never printed.
const (
	minLedgerWait = 5 * time.Second

	envLedgerUser     = "MESHCTL_LEDGER_USER"
	envLedgerPassword = "MESHCTL_LEDGER_PASSWORD"
)

// checkLedger checks --ledger and its TLS flags once the globals are known.
func checkLedger(g *Global) error {
	cfg, err := ledger.ParseURL(g.Ledger)
	if err != nil {
		return usageErrorf("--ledger: %v", err)
	}
	if cfg == nil && (g.LedgerCA != "" || g.LedgerCert != "" || g.LedgerKey != "") {
		return usageErrorf("--ledger-ca, --ledger-cert and --ledger-key go with an etcd:// --ledger")
	}
	if (g.LedgerCert == "") != (g.LedgerKey == "") {
		return usageErrorf("give --ledger-cert and --ledger-key together")
	}
	if g.HostName != "" && !hostNameRe().MatchString(g.HostName) {
		return usageErrorf("--host-name %q: use letters, digits, '.', '_' and '-' (it is part of an etcd key)", g.HostName)
	}
	return nil
}

var hostNameRe = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

// etcdLedger returns how to reach the etcd ledger, or nil when the ledger is
// the state directory's files.
func (e *Env) etcdLedger() (*ledger.EtcdConfig, error) {
	cfg, err := ledger.ParseURL(e.Global.Ledger)
	if err != nil || cfg == nil {
		return nil, err
	}
	cfg.CA, cfg.Cert, cfg.Key = e.Global.LedgerCA, e.Global.LedgerCert, e.Global.LedgerKey
	cfg.Username, cfg.Password = os.Getenv(envLedgerUser), os.Getenv(envLedgerPassword)
	// --lock-timeout bounds the wait for the cluster as it does the wait
	// for the ledger's lock, with room for one leader election.
	cfg.Timeout = max(e.Global.LockTimeout, minLedgerWait)
	return cfg, nil
}

// openLedgerStore opens the build ledger in the store --ledger picks. That
// is the etcd cluster of an etcd:// URL, with etcd as etcdLedger returns
// it. Else it is the files of the state directory dir returns, and dir is
// called only then. It is the one place that chooses between the two stores.
func openLedgerStore(etcd *ledger.EtcdConfig, dir func() (*state.Dir, error)) (*ledger.Ledger, error) {
	if etcd != nil {
		return ledger.OpenEtcd(*etcd)
	}
	d, err := dir()
	if err != nil {
		return nil, err
	}
	return ledger.New(d), nil
}

// hostName is --host-name, else the OS host name.
func (e *Env) hostName() string {
	if e.Global.HostName != "" {
		return e.Global.HostName
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "unknown-host"
	}
	return h
}
