package mesh

import (
	"strings"
	"testing"
)

// TestDecodeMaxUnavailable: max-unavailable is a whole number of at least
// 1. Zero, a negative number and a string are refused, naming the field.
func TestDecodeMaxUnavailable(t *testing.T) {
	const head = "modules:\n  web:\n    containers: {a: {image: x}}\n"
	f, err := Decode("mesh.yaml", []byte(head+"    max-unavailable: 2\n  other:\n    containers: {b: {image: x}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Modules["web"].Budget(); got != 2 {
		t.Errorf("web's budget %d, want 2", got)
	}
	if got := f.Modules["other"].Budget(); got != 0 {
		t.Errorf("other's budget %d, want none (0)", got)
	}
	if got := strings.Join(f.Budgeted(), ","); got != "web" {
		t.Errorf("Budgeted = %q, want web", got)
	}
	for _, tt := range []struct{ name, val, want string }{
		{"zero", "0", "0 is not a budget"},
		{"negative", "-1", "-1 is not a budget"},
		{"a string", "one", "max-unavailable"},
		{"a fraction", "1.5", "max-unavailable"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("mesh.yaml", []byte(head+"    max-unavailable: "+tt.val+"\n"))
			if err == nil || !strings.Contains(err.Error(), "modules.web.max-unavailable") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v, want modules.web.max-unavailable refused: %s", err, tt.want)
			}
		})
	}
}
