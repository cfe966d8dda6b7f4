package state

import (
	"encoding/json"
	"testing"
)

// FuzzDecode: the state-file decoder never panics, accepts only version 1
// documents without unknown fields, and what it accepts encodes back to a
// document it accepts again.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"version": 1, "n": 3}`,
		`{"version": 1}`,
		`{"version": 2, "n": 3}`,
		`{"n": 3}`,
		`{"version": 1, "n": 3, "x": 1}`,
		`{"version": 1, "n": 3} {}`,
		`{"version": 0}`,
		`{"version": "1"}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var c counter
		if err := decode(data, &c); err != nil {
			return
		}
		if c.Version != 1 {
			t.Fatalf("accepted version %d: %q", c.Version, data)
		}
		again, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		var c2 counter
		if err := decode(again, &c2); err != nil || c2 != c {
			t.Fatalf("round trip: %+v -> %s -> %+v, %v", c, again, c2, err)
		}
	})
}
