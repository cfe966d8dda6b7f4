package state

import (
	"encoding/json"
	"errors"
	"fmt"
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

// versionOnlySeeds are documents whose version is read plainly or not:
// keys twice or in another case, escapes, numbers that are no int.
var versionOnlySeeds = []string{
	`{"version": 1, "report": {"containers": [{"name": "a", "version": 9}]}}`,
	`{"report": {"a": "}\",\"version\": 9"}, "version": 1}`,
	`{"version": 1, "version": 2}`,
	`{"version": 1, "VERSION": 9}`,
	`{"Version": 1}`,
	`{"vers\u0069on": 2, "version": 1}`,
	`{"version": 1, "vers\u0069on": 2}`,
	`["version", {"version": 1}]`,
	`{"verſion": 2, "version": 1}`,
	`{"version": 1.0}`,
	`{"version": 1e0}`,
	`{"version": -0}`,
	`{"version": 99999999999999999999}`,
	`{"version": null}`,
	`{"version": "1"}`,
	`{"a\\": 1, "version": 1}`,
	`{"a": "x\\\\", "version": 1}`,
	`{"version" : 1 }`,
	`[{"version": 1}]`,
	`null`,
	`{"version": 1`,
	`{"version": 1} {}`,
	` {"version":1}`,
	``,
}

// FuzzVersionOnly: a document read as VersionOnly gives the version, or the
// error, that json.Unmarshal of its version gives (versionOnlyUnmarshal).
// The plain header is read without a decode, and must agree.
func FuzzVersionOnly(f *testing.F) {
	for _, seed := range versionOnlySeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v VersionOnly
		err := decode(data, &v)
		want, wantErr := versionOnlyUnmarshal(data)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || err == nil && v.Version != want {
			t.Fatalf("%q: version %d, %v; want %d, %v", data, v.Version, err, want, wantErr)
		}
	})
}

// versionOnlyUnmarshal is what decode of a VersionOnly did before it read
// the header plainly: json.Unmarshal of the version alone.
func versionOnlyUnmarshal(data []byte) (int, error) {
	var v struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return 0, err
	}
	switch {
	case v.Version == nil:
		return 0, errors.New(`has no "version"`)
	case *v.Version > Version:
		return 0, fmt.Errorf("has version %d, newer than this meshctl reads (%d): upgrade meshctl", *v.Version, Version)
	case *v.Version < 1:
		return 0, fmt.Errorf("has unknown version %d", *v.Version)
	}
	return *v.Version, nil
}

// TestVersionOnlyReadsThePlainHeader: the version of a document as meshctl
// writes it is read without a decode (headerVersion). Those read otherwise
// are decoded by json.Unmarshal.
func TestVersionOnlyReadsThePlainHeader(t *testing.T) {
	written, err := json.MarshalIndent(struct {
		Header
		Report map[string]any `json:"report"`
	}{Header{Version: 1}, map[string]any{"version": 7, "s": `"version": 3`}}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := headerVersion(written); !ok || v != 1 {
		t.Errorf("headerVersion of %s = %d, %v; want 1, read plainly", written, v, ok)
	}
	for _, s := range []string{`{"version": 1, "report": {}, "version": null}`, `{"vers\u0069on": 1}`, `{"version": 1.0}`, `{"version": 1`, `[1]`} {
		if _, ok := headerVersion([]byte(s)); ok {
			t.Errorf("headerVersion(%s) read it plainly; want it left to json.Unmarshal", s)
		}
	}
}
