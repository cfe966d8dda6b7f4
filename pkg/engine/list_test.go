package engine

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// listAnswer is an engine's list answer of two containers, with fields
// meshctl does not read beside those it does.
const listAnswer = `[
 {"Id":"a1","Names":["/m.web"],"Image":"web:1","ImageID":"sha256:1","Command":"sh","Created":1700000000,
  "Ports":[],"Labels":{"io.meshctl.spec":"{\"v\":3,\"cmd\":\"a \u0026 b\"}","k":"v"},"State":"running",
  "Status":"Up 2 hours (healthy)","HostConfig":{"NetworkMode":"none"},"NetworkSettings":{"Networks":{}},"Mounts":[]},
 {"Id":"b2","Names":["/m.db"],"Image":"db:1","ImageID":"sha256:2","Created":1700000001,"Labels":{},
  "State":"exited","Status":"Exited (0) 1 minute ago"}
]
`

// TestDecodeList: the list decoded one entry at a time reads what a
// decode of the whole answer reads.
func TestDecodeList(t *testing.T) {
	var want []listed
	if err := json.Unmarshal([]byte(listAnswer), &want); err != nil {
		t.Fatal(err)
	}
	var got []listed
	if err := decodeList(strings.NewReader(listAnswer), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
	if got[0].Labels["io.meshctl.spec"] != `{"v":3,"cmd":"a & b"}` {
		t.Errorf("spec label %q", got[0].Labels["io.meshctl.spec"])
	}
}

// TestDecodeListEmptyAndBad: null and [] are no containers. A truncated
// answer, or one that is not an array, fails.
func TestDecodeListEmptyAndBad(t *testing.T) {
	for _, in := range []string{"null", "[]", " [ ]\n"} {
		var got []listed
		if err := decodeList(strings.NewReader(in), &got); err != nil || len(got) != 0 {
			t.Errorf("%q: %v, %d entries; want none", in, err, len(got))
		}
	}
	for _, in := range []string{"", `{"Id":"a"}`, listAnswer[:len(listAnswer)/2], `[{"Id":"a"},`, `[{"Id":1}]`, `"x"`} {
		var got []listed
		if err := decodeList(strings.NewReader(in), &got); err == nil {
			t.Errorf("%q: decoded %d entries, want an error", in, len(got))
		}
	}
}
