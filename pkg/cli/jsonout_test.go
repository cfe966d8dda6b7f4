package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestJSONArraysAndAbsentFields: a nil slice prints [], never null; one in
// an omitzero field is left out, as its type means it.
func TestJSONArraysAndAbsentFields(t *testing.T) {
	type doc struct {
		List    []string `json:"list"`
		Gone    []string `json:"gone,omitzero"`
		Cleared []string `json:"cleared,omitzero"`
	}
	b, err := marshalJSON(doc{Cleared: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(strings.Fields(string(b)), " "), `{ "list": [], "cleared": [] }`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestConvertJSONKeepsTheEntrypoint: meshctl convert -o json prints a mesh
// file that applies as the YAML does. A container without an entrypoint
// must not come out with "entrypoint": [], which clears the image's.
func TestConvertJSONKeepsTheEntrypoint(t *testing.T) {
	f := &mesh.File{Modules: map[string]*mesh.Module{"shop": {Containers: map[string]*mesh.Container{
		"web":   {Image: "meshtest/busybox:1"},
		"clear": {Image: "meshtest/busybox:1", Entrypoint: []string{}},
	}}}}
	b, err := marshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	back, err := mesh.Decode("converted.json", b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if e := back.Modules["shop"].Containers["web"].Entrypoint; e != nil {
		t.Errorf("web's entrypoint came back %#v, want nil (the image's):\n%s", e, b)
	}
	if e := back.Modules["shop"].Containers["clear"].Entrypoint; e == nil || len(e) != 0 {
		t.Errorf("clear's entrypoint came back %#v, want [] (cleared):\n%s", e, b)
	}
}

// TestJSONErrorComesFirst: a failed command's document starts with its
// error, also where the partial result has an error member of its own (a
// window's history entry), whose other members keep their order (window
// run -o json once put closed_at first).
func TestJSONErrorComesFirst(t *testing.T) {
	entry := []byte(`{"id": "w-1", "module": "m", "closed_at": "2026-12-01T00:00:00Z", "result": "failed", "error": "step exited 1"}`)
	out := jsonDocument(entry, errors.New("window w-1 failed"), 1)
	ms, ok := objectMembers(out)
	if !ok {
		t.Fatalf("not an object:\n%s", out)
	}
	var keys []string
	for _, m := range ms {
		keys = append(keys, m.key)
	}
	if got, want := strings.Join(keys, ","), "error,id,module,closed_at,result"; got != want {
		t.Errorf("members %s, want %s:\n%s", got, want, out)
	}
	report := []byte(`{"changed": true, "containers": []}`)
	ms, _ = objectMembers(jsonDocument(report, errors.New("apply failed"), 1))
	if len(ms) != 3 || ms[0].key != "error" || ms[1].key != "changed" {
		t.Errorf("apply's partial report: %v", ms)
	}
}

// TestJSONWritesArrowsAsTheyAre: a reason's "->" and an error's "<" or "&"
// read as in text, not as \u003e, in a result and in an error document.
func TestJSONWritesArrowsAsTheyAre(t *testing.T) {
	b, err := marshalJSON(map[string][]string{"reasons": {"image: web:1 -> web:2"}})
	if err != nil {
		t.Fatal(err)
	}
	out := string(jsonDocument(b, errors.New("a <b> & c"), 1))
	for _, want := range []string{`"image: web:1 -> web:2"`, `"a <b> & c"`} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in:\n%s", want, out)
		}
	}
	entry := []byte(`{"id": "w-1", "error": "x -> y"}`)
	if out := string(jsonDocument(entry, errors.New("w-1 & more"), 1)); !strings.Contains(out, `"w-1 & more"`) {
		t.Errorf("an error in place of the entry's escapes:\n%s", out)
	}
}
