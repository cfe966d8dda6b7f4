package meshrun

import (
	"testing"

	"github.com/meshctl/meshctl/pkg/engine"
)

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
		err := PublicSubnets(engine.Network{Name: "n", Subnets: tt.subnets})
		if (err == nil) != tt.ok {
			t.Errorf("PublicSubnets(%v) = %v, want ok %v", tt.subnets, err, tt.ok)
		}
	}
}

// TestParseHosts: MESHCTL_TEST_HOSTS as scripts/hosts.sh env prints it,
// and what it refuses.
func TestParseHosts(t *testing.T) {
	hosts, err := ParseHosts("host-a=unix:///tmp/m/host-a/docker.sock,host-b=unix:///tmp/m/host-b/docker.sock")
	if err != nil || len(hosts) != 2 || hosts[1] != (Host{"host-b", "unix:///tmp/m/host-b/docker.sock"}) {
		t.Fatalf("ParseHosts = %v, %v", hosts, err)
	}
	for _, bad := range []string{"", "host-a", "host-a=tcp://127.0.0.1:2375", "=unix:///x"} {
		if _, err := ParseHosts(bad); err == nil {
			t.Errorf("ParseHosts(%q) took it", bad)
		}
	}
}
