// Package etcdtest finds the test etcd cluster (scripts/etcd.sh). The tests
// of the etcd ledger use it, in pkg/ledger and cmd/meshctl alike.
package etcdtest

import (
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Endpoints returns the test cluster's endpoints, from MESHCTL_TEST_ETCD
// (comma-separated). Without a cluster the test skips. Under CI=true that is
// a failure instead.
func Endpoints(t testing.TB) string {
	t.Helper()
	eps := os.Getenv("MESHCTL_TEST_ETCD")
	if eps == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("MESHCTL_TEST_ETCD is not set under CI=true: the etcd tests must run (scripts/test starts the cluster)")
		}
		t.Skip("no test etcd cluster: run scripts/etcd.sh start and eval \"$(scripts/etcd.sh env)\"")
	}
	return eps
}

// Prefix is a key prefix of its own for the test or script name. No other
// test run shares it.
func Prefix(name string) string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("/meshctl-test/%s-%x", strings.NewReplacer("/", "-", " ", "_").Replace(name), b)
}

// FreePort returns a free TCP port on 127.0.0.1.
func FreePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// Member starts a one-member etcd of the test's own, on 127.0.0.1 with its
// data in dataDir. It runs the test cluster's binary,
// MESHCTL_TEST_ETCD_DIR/bin/etcd. A test can kill or restore it without
// touching the shared cluster. Member returns what stops it by its pid, which
// cleanup also calls.
func Member(t testing.TB, dataDir, client, peer string) (stop func()) {
	t.Helper()
	bin := filepath.Join(os.Getenv("MESHCTL_TEST_ETCD_DIR"), "bin", "etcd")
	cmd := exec.Command(bin, "--name", "m", "--data-dir", dataDir,
		"--listen-client-urls", "http://127.0.0.1:"+client, "--advertise-client-urls", "http://127.0.0.1:"+client,
		"--listen-peer-urls", "http://127.0.0.1:"+peer, "--initial-advertise-peer-urls", "http://127.0.0.1:"+peer,
		"--initial-cluster", "m=http://127.0.0.1:"+peer, "--log-level", "error")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	stop = func() {
		if !done {
			done = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)
	return stop
}

// ScriptEnv is the environment to run scripts/etcd.sh in on a given test
// cluster. dir is its home and endpoints its client endpoints, as
// MESHCTL_TEST_ETCD_DIR and MESHCTL_TEST_ETCD name them. ScriptEnv sets
// MESHCTL_ETCD_DIR and MESHCTL_ETCD_PORT to them. Otherwise the script acts
// on the cluster of its defaults, someone else's. That is /tmp/meshctl-etcd,
// port 32379.
func ScriptEnv(dir string, endpoints []string) []string {
	port := ""
	if len(endpoints) > 0 {
		_, port, _ = strings.Cut(endpoints[0], ":")
	}
	return append(os.Environ(), "MESHCTL_ETCD_DIR="+dir, "MESHCTL_ETCD_PORT="+port)
}
