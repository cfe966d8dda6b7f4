// Package etcdtest finds the test etcd cluster (scripts/etcd.sh) for the
// tests of the etcd ledger, in pkg/ledger and cmd/meshctl alike.
package etcdtest

import (
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"testing"
)

// Endpoints returns the test cluster's endpoints (MESHCTL_TEST_ETCD,
// comma-separated); without a cluster the test skips, except under
// CI=true, where that is a failure.
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

// Prefix is a key prefix of its own for the test or script name: no other
// test run shares it.
func Prefix(name string) string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("/meshctl-test/%s-%x", strings.NewReplacer("/", "-", " ", "_").Replace(name), b)
}
