package engine

import (
	"encoding/json"
	"fmt"
	"io"
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

// FuzzDecodeList: the list parsed by hand reads what encoding/json reads,
// and fails where it fails. Run with go test -fuzz FuzzDecodeList.
func FuzzDecodeList(f *testing.F) {
	for _, s := range []string{listAnswer, "null", "[]", `[{"id":"x","IMAGE":"y"}]`, `[{"Labels":{"a":"\u00e9\ud800"},"Names":null}]`,
		`[{"Created":1.5}]`, `[{"Created":-3,"X":[1,{"y":[true,false,null]}]}]`, `[{"Id":"a","Id":"b","Labels":{"k":"1"},"Labels":{"l":"2"}}]`,
		"[{\"Id\":\"\xff\"}]", `[{"Status":"a\"b"}] x`, `[{"Ports":[{"IP":"0.0.0.0","PrivatePort":80}]}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var want []listed
		werr := json.Unmarshal([]byte(in), &want)
		var got []listed
		// A reader that gives a byte at a time: every value crosses a refill.
		gerr := decodeList(&oneByte{s: in}, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json: %v; decodeList: %v", in, werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decoded\n%#v\nwant\n%#v", in, got, want)
		}
	})
}

type oneByte struct{ s string }

func (r *oneByte) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.s[0]
	r.s = r.s[1:]
	return 1, nil
}

// TestDecodeListNamesTheOffset: a parse error says where in the answer,
// also past a refill of the buffer.
func TestDecodeListNamesTheOffset(t *testing.T) {
	in := strings.Repeat(`{"Id":"a"},`, 10000) + `{"Id":"a"}}`
	var got []listed
	err := decodeList(strings.NewReader("["+in), &got)
	if want := fmt.Sprintf("near byte %d:", 1+len(in)-1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one %q", err, want)
	}
}
