package ledger

import (
	"strings"
	"testing"
)

// TestParseURLRefusesCredentials: a ledger URL with a user and password, or
// a password taken for a host, is refused, and the error never shows it.
func TestParseURLRefusesCredentials(t *testing.T) {
	for _, u := range []string{
		"etcd://alice:Secret@10.0.0.1:2379",
		"etcd://Secret@10.0.0.1:2379",
		"etcd://10.0.0.1:2379,alice:Secret@10.0.0.2:2379/prod",
		"https://alice:Secret@10.0.0.1:2379",
	} {
		_, err := ParseURL(u)
		if err == nil {
			t.Errorf("%s: accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "Secret") || strings.Contains(err.Error(), "alice") {
			t.Errorf("%s: the error shows the credential: %v", u, err)
		}
	}
	for _, u := range []string{"etcd://10.0.0.1:2379", "etcd://a:1,b:2/prod", "file", ""} {
		if _, err := ParseURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// TestParseImageRefusesBadPort: a registry port outside 1..65535 is not an
// image reference.
func TestParseImageRefusesBadPort(t *testing.T) {
	for _, ref := range []string{"localhost:99999/x", "localhost:0/x", "reg.example:65536/app@sha256:" + strings.Repeat("a", 64)} {
		if _, err := ParseImage(ref); exitCodeOf(err) != 2 {
			t.Errorf("%s: %v; want exit 2", ref, err)
		}
	}
	for _, ref := range []string{"localhost:5000/x", "reg.example:65535/app", "[::1]:5000/x", "busybox"} {
		if _, err := ParseImage(ref); err != nil {
			t.Errorf("%s: %v", ref, err)
		}
	}
}
