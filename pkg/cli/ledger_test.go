package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLedgerFlags checks --ledger and its TLS flags before anything runs.
func TestLedgerFlags(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--ledger", "nfs://x"}, 2, "want file or etcd://"},
		{[]string{"--ledger", "etcd://nohost"}, 2, `endpoint "nohost" is not HOST:PORT`},
		{[]string{"--ledger", "etcd://a:1,b"}, 2, `endpoint "b" is not HOST:PORT`},
		{[]string{"--ledger-ca", "ca.pem"}, 2, "go with an etcd:// --ledger"},
		{[]string{"--ledger", "etcd://a:1", "--ledger-cert", "c.pem"}, 2, "--ledger-cert and --ledger-key together"},
		{[]string{"--ledger", "etcd://127.0.0.1:1", "--ledger-ca", "/nonexistent/ca.pem"}, 1, "etcd ledger TLS"},
		{[]string{"--host-name", "a/b"}, 2, "--host-name"},
	}
	for _, tt := range tests {
		code, out, errs := runMeshctl(t, dir, append(tt.args, "build", "current", "app")...)
		if code != tt.code || !strings.Contains(errs, tt.want) || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d saying %q", tt.args, code, errs, out, tt.code, tt.want)
		}
	}
}

// TestLedgerFromConfigNeverPrintsPassword takes the etcd ledger from the
// config file's key "ledger" and its password from MESHCTL_LEDGER_PASSWORD:
// the cluster does not answer, the error names the endpoints, and the
// password appears nowhere.
func TestLedgerFromConfigNeverPrintsPassword(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("ledger: etcd://127.0.0.1:1,127.0.0.1:2/p\nlock-timeout: 0s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("MESHCTL_LEDGER_USER", "ci")
	t.Setenv("MESHCTL_LEDGER_PASSWORD", "s3cret-do-not-print")
	code, out, errs := runMeshctl(t, filepath.Join(t.TempDir(), "state"), "--config", cfg, "-v", "build", "current", "app")
	if code != 1 || !strings.Contains(errs, "etcd ledger at 127.0.0.1:1,127.0.0.1:2 did not answer") {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the endpoints", code, errs)
	}
	if strings.Contains(out+errs, "s3cret") {
		t.Errorf("the password was printed: %q %q", out, errs)
	}
}
