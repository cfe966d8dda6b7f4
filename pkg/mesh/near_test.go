package mesh

import "testing"

// TestNear: a slip of the fingers from a known name (two letters swapped, one
// doubled or dropped) is near it; a letter changed is a name of its own.
func TestNear(t *testing.T) {
	known := []string{"web", "store", "app", "sa675d22fe"}
	for word, want := range map[string]string{
		"wbe": "web", "stroe": "store", "webb": "web", "stor": "store",
		"api": "", "la675d22fe": "", "db": "", "web": "", "frontend": "", "apps": "app",
	} {
		if got := Near(word, known); got != want {
			t.Errorf("Near(%q) = %q, want %q", word, got, want)
		}
	}
}
