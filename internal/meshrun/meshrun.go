// Package meshrun runs meshctl as a real process against the test engine.
// The fault harness (internal/harness) and cmd/meshctl's own tests share it.
//
// A test binary that uses it must serve meshctl by its argv[0]. Its TestMain
// does that with testscript.Main, mapping "meshctl" to cli.Main.
package meshrun

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// TestEngine returns the test engine's address, or skips the test when
// there is none. Under CI=true a missing engine fails the test instead.
func TestEngine(t *testing.T) string {
	t.Helper()
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	err := errors.New("MESHCTL_TEST_DOCKER_HOST is not set (scripts/engine.sh start)")
	if host != "" {
		err = PingTestEngine()
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no test engine: %v", err)
		}
		t.Skipf("no test engine: %v", err)
	}
	return host
}

// PingTestEngine checks that the test engine answers and gives public subnets.
func PingTestEngine() error {
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" {
		return errors.New("MESHCTL_TEST_DOCKER_HOST is not set (scripts/engine.sh start)")
	}
	return PingEngine(host)
}

// PingEngine checks that the engine at host answers and gives public
// subnets. The mesh scripts ping each host engine with it.
func PingEngine(host string) error {
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

// probeAddressPool creates a network as meshctl creates its module networks.
// It fails unless the engine's pool gave it a subnet outside the private
// ranges. No test network may take a private-range address: scripts/engine.sh
// gives the engine the pool 198.18.0.0/16, a slice of 198.18.0.0/15.
// scripts/hosts.sh gives each host engine a slice of 198.19.0.0/16. The probe
// runs before the first test on an engine, so no test runs on one whose pool
// is private.
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
	return PublicSubnets(n)
}

// PublicSubnets fails, naming the network, unless all its subnets are public.
// A network without subnets fails too. The private ranges are 10/8,
// 172.16/12, 192.168/16 and fc00::/7.
func PublicSubnets(n engine.Network) error {
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
				"start the test engine with scripts/engine.sh (--default-address-pool base=198.18.0.0/16,size=24)", n.Name, s)
		}
	}
	return nil
}

// Meshctl runs the test binary as meshctl against the test engine.
// Each one has a private HOME and state directory.
type Meshctl struct {
	T     *testing.T
	Dir   string        // the working directory, a temporary one
	Bin   string        // the meshctl to run, a link to the test binary
	Env   []string      // the environment of every command
	State string        // the state directory
	Eng   engine.Client // the test engine, for the test's own checks
}

// New returns a Meshctl on the engine at host, in a new temporary directory.
func New(t *testing.T, host string) *Meshctl {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin", "meshctl")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	st := filepath.Join(dir, "state")
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"TMPDIR=" + os.TempDir(),
		"DOCKER_HOST=" + host,
		"MESHCTL_STATE_DIR=" + st,
	}
	eng, err := engine.New(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	return &Meshctl{T: t, Dir: dir, Bin: bin, Env: env, State: st, Eng: eng}
}

// Command returns the command that runs meshctl with args.
func (m *Meshctl) Command(args ...string) *exec.Cmd {
	cmd := exec.Command(m.Bin, args...)
	cmd.Dir, cmd.Env = m.Dir, m.Env
	// An exec: step still holding the window's stderr must not hang Wait.
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Run runs meshctl to its end and returns its stdout and stderr together.
func (m *Meshctl) Run(args ...string) (string, error) {
	stdout, stderr, err := m.Run2(args...)
	return stdout + stderr, err
}

// Run2 runs meshctl to its end and returns its stdout and its stderr.
func (m *Meshctl) Run2(args ...string) (string, string, error) {
	var stdout, stderr Output
	cmd := m.Command(args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// CleanupModule removes the module's containers now and when the test ends.
// It removes the module's networks too.
func (m *Meshctl) CleanupModule(module string) {
	rm := func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := m.Eng.List(ctx, map[string]string{"io.meshctl.module": module})
		if err != nil {
			m.T.Logf("cleanup %s: %v", module, err)
			return
		}
		for _, x := range list {
			if err := m.Eng.Remove(ctx, x.ID); err != nil {
				m.T.Logf("cleanup %s: %v", x.Name, err)
			}
		}
		nets, err := m.Eng.Networks(ctx, map[string]string{"io.meshctl.module": module})
		if err != nil {
			m.T.Logf("cleanup %s: %v", module, err)
			return
		}
		for _, n := range nets {
			if err := m.Eng.RemoveNetwork(ctx, n.ID); err != nil {
				m.T.Logf("cleanup %s: %v", n.Name, err)
			}
		}
	}
	rm()
	m.T.Cleanup(rm)
}

// Output is a strings.Builder that may be written while it is read.
// A request cut short by its context can race its last write.
type Output struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p under the lock.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
