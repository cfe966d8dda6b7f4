package engine

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
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
		"[{\"Id\":\"\xff\"}]", `[{"Status":"a\"b"}] x`, `[{"Labels":{"a\u0041":"\u0026\/\t\"","\ud83d\ude00":"\udead"}}]`, `[{"Ports":[{"IP":"0.0.0.0","PrivatePort":80}]}]`} {
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

// TestUnquoteReadsAsEncodingJSON: a string with escapes reads as
// encoding/json reads it, whether unquoteASCII takes it or leaves it, and
// fails where encoding/json fails. The ASCII escapes are unquoteASCII's.
func TestUnquoteReadsAsEncodingJSON(t *testing.T) {
	fast := []string{`"a\"b"`, `"\\"`, `"\/\b\f\n\r\t"`, `"x \u0026 y"`, `"\u00e9\u4E2D"`, `"\u0000"`,
		`"{\"v\":3,\"command\":[\"sh\",\"-c\",\"sleep 1 \u0026 wait\"]}"`, `"end\\"`, `"\uFFFF"`}
	slow := []string{`"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `"é\n"`, `"\x"`, `"\u12"`, `"\u12g4"`, `"\'"`}
	for _, in := range append(fast, slow...) {
		var want string
		werr := json.Unmarshal([]byte(in), &want)
		got, gerr := unquote([]byte(in))
		if (werr == nil) != (gerr == nil) || got != want {
			t.Errorf("%s: unquote %q, %v; encoding/json %q, %v", in, got, gerr, want, werr)
		}
		_, ok := unquoteASCII([]byte(in))
		if isFast := slices.Contains(fast, in); ok != isFast {
			t.Errorf("%s: read by unquoteASCII %v, want %v", in, ok, isFast)
		}
	}
}

// BenchmarkDecodeList decodes an engine's list of 1000 containers as
// meshctl makes them: five labels, one of them the spec with its quotes
// escaped, and the fields the list has that meshctl does not read.
func BenchmarkDecodeList(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 1000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"Id":"%064d","Names":["/bench.c%04d"],"Image":"meshtest/busybox:1","ImageID":"sha256:%064d",`+
			`"Command":"sh -c 'sleep 86400 & wait'","Created":1796319827,"Ports":[],"Labels":{"io.meshctl.container":"c%04d",`+
			`"io.meshctl.managed":"7174703ba2b55409","io.meshctl.module":"bench","io.meshctl.role":"service",`+
			`"io.meshctl.spec":"{\"v\":3,\"image\":\"meshtest/busybox:1\",\"command\":[\"sh\",\"-c\",\"sleep 86400 \\u0026 wait\"],`+
			`\"env\":{\"BENCH\":\"sha256:%064d\"},\"network\":\"none\",\"restart\":\"unless-stopped\"}"},`+
			`"State":"running","Status":"Up 19 minutes","HostConfig":{"NetworkMode":"none"},"NetworkSettings":{"Networks":{"none":`+
			`{"IPAMConfig":null,"Links":null,"Aliases":null,"NetworkID":"%064d","EndpointID":"%064d","Gateway":"","IPAddress":"",`+
			`"IPPrefixLen":0,"IPv6Gateway":"","GlobalIPv6Address":"","GlobalIPv6PrefixLen":0,"MacAddress":"","DriverOpts":null}}},"Mounts":[]}`,
			i, i, i, i, i, i, i)
	}
	sb.WriteString("]")
	answer := sb.String()
	b.SetBytes(int64(len(answer)))
	b.ReportAllocs()
	for b.Loop() {
		var list []listed
		if err := decodeList(strings.NewReader(answer), &list); err != nil || len(list) != 1000 {
			b.Fatalf("%d containers, %v", len(list), err)
		}
	}
}
