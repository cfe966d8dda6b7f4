package engine

import "testing"

func TestReason(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`Error response from daemon: Get "http://127.0.0.1:5999/v2/": dial tcp 127.0.0.1:5999: connect: connection refused`,
			"registry 127.0.0.1:5999: connection refused"},
		{`Get "https://reg.example:5000/v2/x/manifests/1": dial tcp: lookup reg.example: no such host`,
			"registry reg.example:5000: lookup reg.example: no such host"},
		{`Post "http://%2Fvar%2Frun%2Fdocker.sock/v1.47/containers/create?name=x": context deadline exceeded`,
			"context deadline exceeded"},
		{`Error response from daemon: manifest for meshtest/busybox:9 not found: manifest unknown`,
			"manifest for meshtest/busybox:9 not found: manifest unknown"},
		{"image missing and pull: never", "image missing and pull: never"},
	} {
		if got := Reason(tt.in); got != tt.want {
			t.Errorf("Reason(%q)\n = %q\nwant %q", tt.in, got, tt.want)
		}
	}
}
