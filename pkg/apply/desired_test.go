package apply

import (
	"encoding/json"
	"testing"

	"github.com/meshctl/meshctl/pkg/mesh"
)

// TestEngineSpecEntrypoint follows "entrypoint: []" from the file through
// applied.json (what a window's close recreates from) to the engine's spec,
// where only a non-nil empty Entrypoint clears the image's.
func TestEngineSpecEntrypoint(t *testing.T) {
	for _, tt := range []struct {
		name, src string
		cleared   bool
	}{
		{"cleared", "modules:\n  m:\n    containers:\n      c: {image: x, entrypoint: []}\n", true},
		{"image's", "modules:\n  m:\n    containers:\n      c: {image: x}\n", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, err := mesh.Decode("mesh.yaml", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(&Applied{File: f})
			if err != nil {
				t.Fatal(err)
			}
			var a Applied
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatal(err)
			}
			for step, file := range map[string]*mesh.File{"from the file": f, "from applied.json": a.File} {
				ds, err := Desire(file, nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				es := ds[0].EngineSpec("scope")
				if cleared := es.Entrypoint != nil && len(es.Entrypoint) == 0; cleared != tt.cleared || !tt.cleared && es.Entrypoint != nil {
					t.Errorf("%s: engine Entrypoint = %#v, want cleared=%v", step, es.Entrypoint, tt.cleared)
				}
				have, err := mesh.DecodeSpec(es.Labels[LabelSpec])
				if err != nil {
					t.Fatal(err)
				}
				if d := mesh.Diff(have, ds[0].Spec); len(d) != 0 {
					t.Errorf("%s: recorded spec differs from the desired one: %q", step, d)
				}
				if cleared := have.Entrypoint != nil && len(have.Entrypoint) == 0; cleared != tt.cleared {
					t.Errorf("%s: recorded entrypoint = %#v, want cleared=%v", step, have.Entrypoint, tt.cleared)
				}
			}
		})
	}
}
