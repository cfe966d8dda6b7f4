package ledger

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdTLSAndAuth runs a one-member etcd of its own (the test cluster's
// binary, on a free 127.0.0.1 port, data in a temp dir, stopped by its pid)
// that requires client certificates and, once auth is on, a user: the
// ledger works with --ledger-ca/-cert/-key and the user and password, and
// fails without the client certificate or with a wrong password.
func TestEtcdTLSAndAuth(t *testing.T) {
	testEtcd(t) // skips (or fails under CI) without the test cluster
	bin := filepath.Join(os.Getenv("MESHCTL_TEST_ETCD_DIR"), "bin", "etcd")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the test cluster's etcd binary: %v", err)
	}
	dir := t.TempDir()
	ca, caKey := writeCert(t, dir, "ca", nil, nil)
	writeCert(t, dir, "server", ca, caKey)
	writeCert(t, dir, "client", ca, caKey)
	client, peer := freePort(t), freePort(t)
	url := "https://127.0.0.1:" + client
	cmd := exec.Command(bin, "--name", "tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", url, "--advertise-client-urls", url,
		"--listen-peer-urls", "http://127.0.0.1:"+peer, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peer,
		"--initial-cluster", "tls=http://127.0.0.1:"+peer,
		"--cert-file", filepath.Join(dir, "server.pem"), "--key-file", filepath.Join(dir, "server-key.pem"),
		"--trusted-ca-file", filepath.Join(dir, "ca.pem"), "--client-cert-auth", "--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // our own member, by its pid
		_ = cmd.Wait()
	})

	cfg := EtcdConfig{Endpoints: []string{"127.0.0.1:" + client}, Prefix: "/meshctl", Timeout: 10 * time.Second,
		CA: filepath.Join(dir, "ca.pem"), Cert: filepath.Join(dir, "client.pem"), Key: filepath.Join(dir, "client-key.pem")}

	// Turn auth on, with the client certificate: a root user and ci.
	info := transport.TLSInfo{TrustedCAFile: cfg.CA, CertFile: cfg.Cert, KeyFile: cfg.Key}
	tc, err := info.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: cfg.Endpoints, TLS: tc, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if _, err := admin.Get(ctx, "probe"); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("the TLS member did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "rootpw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.UserAdd(ctx, "ci", "s3cret"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "ledger"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "ledger", "/meshctl/", clientv3.GetPrefixRangeEnd("/meshctl/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "ci", "ledger"); return err },
		func() error { _, err := admin.UserAdd(ctx, "host", "h0stpw"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "reader"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "reader", "/meshctl/", clientv3.GetPrefixRangeEnd("/meshctl/"), clientv3.PermissionType(clientv3.PermRead))
			return err
		},
		func() error { _, err := admin.UserGrantRole(ctx, "host", "reader"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}

	ok := cfg
	ok.Username, ok.Password = "ci", "s3cret"
	l := etcdClient(t, ok)
	id := request(t, l, "app").Builds[0].ID
	rec(t, l, id, digestImage("reg/app", 1))
	if b, err := l.Current("app"); err != nil || b.ID != id {
		t.Fatalf("current over TLS with a user: %+v, %v", b, err)
	}

	// Refused at once, saying why (never the password), not retried for
	// the whole budget as a cluster that did not answer.
	for name, c := range map[string]struct {
		cfg  EtcdConfig
		op   func(l *Ledger) error
		want string
	}{
		"no client certificate": {func() EtcdConfig { c := ok; c.Cert, c.Key = "", ""; return c }(), readApp, ""},
		"a wrong password": {func() EtcdConfig { c := ok; c.Password = "wrong"; return c }(), readApp,
			"authentication failed: check MESHCTL_LEDGER_USER and MESHCTL_LEDGER_PASSWORD"},
		"a read-only role, a request": {func() EtcdConfig { c := ok; c.Username, c.Password = "host", "h0stpw"; return c }(),
			func(l *Ledger) error { _, err := l.Request(context.Background(), []string{"app"}, ""); return err },
			"permission denied"},
	} {
		// Retried, a refusal would end as "did not answer" after the 15 s.
		c.cfg.Timeout = 15 * time.Second
		l, err := OpenEtcd(c.cfg)
		if err == nil {
			err = c.op(l)
			l.Close()
		}
		switch {
		case err == nil:
			t.Errorf("%s: succeeded", name)
		case strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "h0stpw"):
			t.Errorf("%s: the error shows the password: %v", name, err)
		case c.want != "" && (!strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "did not answer")):
			t.Errorf("%s: %v; want %q, at once", name, err, c.want)
		}
	}
	// The read-only role still reads.
	host := ok
	host.Username, host.Password = "host", "h0stpw"
	if b, err := etcdClient(t, host).Current("app"); err != nil || b.ID != id {
		t.Errorf("current with a read-only role: %+v, %v", b, err)
	}
}

func readApp(l *Ledger) error {
	_, _, err := l.CurrentBuild(context.Background(), "app")
	return err
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// writeCert writes NAME.pem and NAME-key.pem in dir: a CA when parent is
// nil, else a certificate for 127.0.0.1 signed by it (server and client).
func writeCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	for file, block := range map[string]*pem.Block{name + ".pem": {Type: "CERTIFICATE", Bytes: der}, name + "-key.pem": {Type: "EC PRIVATE KEY", Bytes: kb}} {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}
