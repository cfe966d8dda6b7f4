package meshrun

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Host is one host engine of scripts/hosts.sh: its name and its socket.
type Host struct{ Name, Sock string }

// TestHosts returns the host engines of MESHCTL_TEST_HOSTS, each pinged.
// Without them the test skips, saying why. Under CI=true it fails instead,
// as TestMeshScripts in cmd/meshctl does.
func TestHosts(t *testing.T) []Host {
	t.Helper()
	hosts, err := ParseHosts(os.Getenv("MESHCTL_TEST_HOSTS"))
	for i := 0; err == nil && i < len(hosts); i++ {
		if err = PingEngine(hosts[i].Sock); err != nil {
			err = fmt.Errorf("host %s: %w", hosts[i].Name, err)
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no host engines: %v", err)
		}
		t.Skipf("no host engines: %v", err)
	}
	return hosts
}

// ParseHosts reads a list as scripts/hosts.sh env prints it:
// "host-a=unix:///…/docker.sock,host-b=…".
func ParseHosts(list string) ([]Host, error) {
	if list == "" {
		return nil, fmt.Errorf("MESHCTL_TEST_HOSTS is not set (scripts/hosts.sh start; eval \"$(scripts/hosts.sh env)\")")
	}
	var out []Host
	for _, kv := range strings.Split(list, ",") {
		name, sock, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !strings.HasPrefix(sock, "unix:///") {
			return nil, fmt.Errorf("MESHCTL_TEST_HOSTS: %q is not HOST=unix:///PATH", kv)
		}
		out = append(out, Host{name, sock})
	}
	return out, nil
}

// SetEnv sets one variable of every command's environment.
func (m *Meshctl) SetEnv(key, value string) {
	for i, kv := range m.Env {
		if strings.HasPrefix(kv, key+"=") {
			m.Env[i] = key + "=" + value
			return
		}
	}
	m.Env = append(m.Env, key+"="+value)
}
