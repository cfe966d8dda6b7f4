package lifecycle

import (
	"slices"
	"testing"
)

// TestDependencyOrder orders a window's held containers after their
// dependencies; a cycle (possible only across files) does not hang.
func TestDependencyOrder(t *testing.T) {
	deps := map[string][]string{"m.app": {"m.db", "x.y"}, "m.db": {"m.disk"}, "m.a": {"m.b"}, "m.b": {"m.a"}}
	got := DependencyOrder([]string{"m.app", "m.db", "m.disk", "m.web"}, func(n string) []string { return deps[n] })
	if want := []string{"m.disk", "m.db", "m.app", "m.web"}; !slices.Equal(got, want) {
		t.Errorf("DependencyOrder = %q, want %q", got, want)
	}
	if got := DependencyOrder([]string{"m.a", "m.b"}, func(n string) []string { return deps[n] }); len(got) != 2 {
		t.Errorf("cycle: %q", got)
	}
}
