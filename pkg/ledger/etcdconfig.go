package ledger

import (
	"errors"
	"fmt"
	"net"
	"path"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// The etcd ledger's configuration and errors. They are in every build, the
// client that uses them (etcdstore.go) only in one without the tag noetcd
// (noetcd.go).

// EtcdConfig says how to reach the etcd cluster that holds a ledger.
type EtcdConfig struct {
	// Endpoints are HOST:PORT of the cluster's members.
	Endpoints []string
	// Prefix is the key prefix of everything meshctl keeps (default /meshctl).
	Prefix string
	// CA, Cert and Key are PEM files for TLS. With none of them set, the
	// client uses plain TCP.
	CA, Cert, Key string
	// Username and Password authenticate, when set.
	Username, Password string
	// Timeout bounds one operation, its retries included (default 20s).
	Timeout time.Duration
}

// DefaultEtcdPrefix is the key prefix of an etcd:// ledger URL that names none.
const DefaultEtcdPrefix = "/meshctl"

// ParseURL parses a --ledger value. "file" or "" names the state directory's
// files, and ParseURL returns nil for them. Otherwise the value is
// etcd://HOST:PORT[,HOST:PORT…][/PREFIX]. A URL with credentials
// (USER:PASSWORD@ or PASSWORD@) is refused, and its error never shows them.
func ParseURL(u string) (*EtcdConfig, error) {
	if u == "" || u == "file" {
		return nil, nil
	}
	rest, ok := strings.CutPrefix(u, "etcd://")
	if !ok {
		if strings.Contains(u, "@") {
			return nil, errors.New("ledger URL: want file or etcd://HOST:PORT[,HOST:PORT…][/PREFIX] (the URL is not shown: it may hold a credential)")
		}
		return nil, fmt.Errorf("ledger %q: want file or etcd://HOST:PORT[,HOST:PORT…][/PREFIX]", u)
	}
	hosts, prefix, _ := strings.Cut(rest, "/")
	if strings.Contains(hosts, "@") {
		// Never echoed. What comes before @ is a user and password, or a
		// password taken for a host.
		return nil, errors.New("ledger URL: credentials (USER:PASSWORD@) are refused in a URL, which shows in ps, logs and config files; the URL is not shown; set MESHCTL_LEDGER_USER and MESHCTL_LEDGER_PASSWORD instead")
	}
	cfg := &EtcdConfig{Prefix: DefaultEtcdPrefix}
	if prefix != "" {
		cfg.Prefix = path.Clean("/" + prefix)
	}
	for _, h := range strings.Split(hosts, ",") {
		if _, port, err := net.SplitHostPort(h); err != nil || port == "" {
			return nil, fmt.Errorf("ledger %q: endpoint %q is not HOST:PORT", u, h)
		}
		cfg.Endpoints = append(cfg.Endpoints, h)
	}
	return cfg, nil
}

// attempt bounds one round trip. So a member that went away mid-call costs
// one attempt, not the whole budget.
const attempt = 3 * time.Second

// UnreachableError reports an etcd ledger that did not answer (exit 1).
type UnreachableError struct {
	Endpoints []string
	Err       error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("etcd ledger at %s did not answer: %v; check the cluster (etcdctl endpoint health) and run the command again (a retried request or record is safe)",
		strings.Join(e.Endpoints, ","), e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Fault says an unreachable ledger is a failure.
func (e *UnreachableError) Fault() fault.Kind { return fault.Failed }

// ImportingError reports an etcd ledger that an import is writing (exit 1).
// An interrupted import leaves the ledger the same way, half written. The
// ledger issues no id and answers nothing until the import is whole. Running
// the same import again finishes it.
type ImportingError struct{ Where string }

func (e *ImportingError) Error() string {
	return fmt.Sprintf("ledger %s is being imported, or an import into it was interrupted: it answers once the import is whole; run the same meshctl build import again to finish it", e.Where)
}

// Fault says a ledger under import is a failure. The fix is to run the import
// again.
func (e *ImportingError) Fault() fault.Kind { return fault.Failed }

// RefusedError reports an etcd ledger that answered and refused the operation
// (exit 1). Running it again cannot change the answer, so it fails at once,
// not after --lock-timeout. Examples are a wrong user or password, or a role
// without the permission. So are a transaction too large for the cluster, a
// full database and a TLS handshake the member rejects. Nothing was changed.
type RefusedError struct {
	Endpoints []string
	// Why says what was refused and what to do, never a credential.
	Why string
	Err error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("etcd ledger at %s: %s; nothing was changed", strings.Join(e.Endpoints, ","), e.Why)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Fault says a refused operation is a failure.
func (e *RefusedError) Fault() fault.Kind { return fault.Failed }
