package main

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// testEtcd returns the test cluster's endpoints (scripts/etcd.sh, in
// MESHCTL_TEST_ETCD); without one the test skips, except under CI=true.
func testEtcd(t testing.TB) string {
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

// etcdPrefix is a key prefix of its own for one test or script.
func etcdPrefix(name string) string {
	var b [6]byte
	rand.Read(b[:])
	return fmt.Sprintf("/meshctl-test/%s-%x", strings.NewReplacer("/", "-", " ", "_").Replace(name), b)
}

// TestEtcdScripts runs testdata/etcd/*.txtar: the scripts of the etcd
// ledger, each with MESHCTL_LEDGER set to a prefix of its own in the test
// cluster (ETCD_EPS names its endpoints).
func TestEtcdScripts(t *testing.T) {
	eps := testEtcd(t)
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "etcd"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("MESHCTL_UPDATE_SCRIPTS") == "1",
		Setup: func(env *testscript.Env) error {
			if err := setup(env); err != nil {
				return err
			}
			env.Setenv("ETCD_EPS", eps)
			env.Setenv("MESHCTL_LEDGER", "etcd://"+eps+etcdPrefix(filepath.Base(env.WorkDir)))
			env.Setenv("MESHCTL_TEST_ETCD_DIR", os.Getenv("MESHCTL_TEST_ETCD_DIR"))
			return nil
		},
		Condition: condition,
		Cmds:      cmds,
	})
}
