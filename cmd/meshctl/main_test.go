package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/meshctl/meshctl/pkg/convert"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the scripts run meshctl as a real process: "exec meshctl …"
// runs this test binary as meshctl, and as meshctl-convert (its main's
// body), which meshctl convert runs from PATH. A window's exec: step runs
// it as the step's guard too.
func TestMain(m *testing.M) {
	window.MaybeStepGuard()
	testscript.Main(m, map[string]func(){
		"meshctl": func() { os.Exit(cli.Main()) },
		"meshctl-convert": func() {
			cli.Converter = convert.Project
			os.Exit(cli.Main())
		},
	})
}

// TestScripts runs testdata/script/*.txtar. Set MESHCTL_UPDATE_SCRIPTS=1 to
// rewrite their golden stdout/stderr files.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("MESHCTL_UPDATE_SCRIPTS") == "1",
		Setup:               setup,
		Condition:           condition,
		Cmds:                scriptCmds(),
	})
}

// setup gives each script its own HOME, XDG dirs and state dir under $WORK,
// and points meshctl at the test engine (never the host's default one).
func setup(env *testscript.Env) error {
	work := env.WorkDir
	for k, v := range map[string]string{
		"HOME":              filepath.Join(work, "home"),
		"XDG_CONFIG_HOME":   filepath.Join(work, "home", ".config"),
		"XDG_STATE_HOME":    filepath.Join(work, "home", ".local", "state"),
		"XDG_CACHE_HOME":    filepath.Join(work, "home", ".cache"),
		"MESHCTL_STATE_DIR": filepath.Join(work, "state"),
	} {
		env.Setenv(k, v)
	}
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" {
		// Nothing must reach a real engine by accident: point at nowhere.
		host = "unix://" + filepath.Join(work, "no-engine.sock")
	}
	env.Setenv("DOCKER_HOST", host)
	env.Setenv("MESHCTL_TEST_DOCKER_HOST", host)
	env.Setenv("CI", os.Getenv("CI"))
	// REPO lets a script run the project's own scripts (scripts/engine.sh).
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	env.Setenv("REPO", repo)
	// ENGDIR is where a script may start a private engine of its own (kept
	// short: a unix socket path is limited to 107 bytes). Whatever runs
	// there is stopped when the script ends.
	engdir := filepath.Join(os.TempDir(), fmt.Sprintf("mcs-%d-%d", os.Getpid(), engineSeq.Add(1)))
	env.Setenv("ENGDIR", engdir)
	env.Defer(func() {
		if _, err := os.Stat(filepath.Join(engdir, "dockerd.pid")); err == nil {
			cmd := exec.Command(filepath.Join(repo, "scripts", "engine.sh"), "stop")
			cmd.Env = append(os.Environ(), "MESHCTL_ENGINE_DIR="+engdir, "MESHCTL_TEST_DOCKER_HOST=unix://"+engdir+"/docker.sock")
			_ = cmd.Run()
		}
		_ = os.RemoveAll(engdir)
	})
	return nil
}

// engineSeq numbers the scripts' own engine directories.
var engineSeq atomic.Int64

var (
	engineOnce sync.Once
	engineErr  error
)

// condition knows [engine] (the test engine answers) and [root]; any other
// name is an error, not a silent false.
func condition(cond string) (bool, error) {
	switch cond {
	case "engine":
		engineOnce.Do(func() { engineErr = pingTestEngine() })
		if engineErr != nil && os.Getenv("CI") == "true" {
			return false, fmt.Errorf("CI=true and the test engine does not answer: %v", engineErr)
		}
		return engineErr == nil, nil
	case "root":
		return os.Geteuid() == 0, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}

func pingTestEngine() error {
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" {
		return errors.New("MESHCTL_TEST_DOCKER_HOST is not set (scripts/engine.sh start)")
	}
	c, err := engine.New(host)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		return err
	}
	return probeAddressPool(ctx, c)
}

// probeAddressPool creates a network on the test engine, as meshctl creates
// its module networks (no addresses asked for: the engine's pool gives
// them), and fails unless its subnet is outside the private ranges: no test
// network may take a private-range address (scripts/engine.sh gives the
// engine the pool 198.18.0.0/15). Run once, before the first script on the
// engine, so that no script runs on an engine whose pool is private.
func probeAddressPool(ctx context.Context, c engine.Client) error {
	name := fmt.Sprintf("meshctl-pool-probe-%d", os.Getpid())
	if _, err := c.CreateNetwork(ctx, name, engine.NetworkSpec{Labels: map[string]string{"io.meshctl.test": "pool-probe"}}); err != nil {
		return fmt.Errorf("create a probe network on the test engine: %w", err)
	}
	defer func() { _ = c.RemoveNetwork(context.Background(), name) }()
	n, err := c.InspectNetwork(ctx, name)
	if err != nil {
		return err
	}
	return publicSubnets(n)
}

// publicSubnets fails, naming the network, unless it has subnets and none
// is in a private range (10/8, 172.16/12, 192.168/16, fc00::/7).
func publicSubnets(n engine.Network) error {
	if len(n.Subnets) == 0 {
		return fmt.Errorf("network %s has no subnet listed", n.Name)
	}
	for _, s := range n.Subnets {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("network %s: subnet %q: %w", n.Name, s, err)
		}
		if p.Addr().IsPrivate() {
			return fmt.Errorf("network %s took the private range %s: no test network may; "+
				"start the test engine with scripts/engine.sh (--default-address-pool base=198.18.0.0/15,size=24)", n.Name, s)
		}
	}
	return nil
}

// TestPublicSubnets: the scripts' check that a test network took no
// private-range address (the [engine] condition's probe, ctr network,
// ctr netcreate).
func TestPublicSubnets(t *testing.T) {
	for _, tt := range []struct {
		subnets []string
		ok      bool
	}{
		{[]string{"198.18.3.0/24"}, true},
		{[]string{"198.19.255.0/24", "2001:db8::/64"}, true},
		{[]string{"172.17.0.0/16"}, false},
		{[]string{"198.18.3.0/24", "10.1.0.0/24"}, false},
		{[]string{"192.168.5.0/24"}, false},
		{[]string{"fd00:1::/64"}, false},
		{nil, false},
		{[]string{"nonsense"}, false},
	} {
		err := publicSubnets(engine.Network{Name: "n", Subnets: tt.subnets})
		if (err == nil) != tt.ok {
			t.Errorf("publicSubnets(%v) = %v, want ok %v", tt.subnets, err, tt.ok)
		}
	}
}
