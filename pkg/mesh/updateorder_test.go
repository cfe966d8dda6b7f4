package mesh

import (
	"strings"
	"testing"
)

// TestDecodeUpdateOrder: start-first is accepted where old and new can run
// at once (on a module network, no host port, no writable volume), from the
// container or the module's default; refused elsewhere with the reason.
func TestDecodeUpdateOrder(t *testing.T) {
	const head = "modules:\n  m:\n    networks: {net: {}}\n"
	ok := head + `    update-order: start-first
    containers:
      a: {image: x, networks: [net], volumes: ["conf:/etc/conf:ro"], drain: 5s}
      b: {image: x, update-order: stop-first, ports: ["127.0.0.1:80:80"]}
`
	f, err := Decode("mesh.yaml", []byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	m := f.Modules["m"]
	if got := UpdateOrderOf(m, m.Containers["a"]); got != StartFirst {
		t.Errorf("a: %s, want the module's start-first", got)
	}
	if got := UpdateOrderOf(m, m.Containers["b"]); got != StopFirst {
		t.Errorf("b: %s, want its own stop-first", got)
	}
	if got := m.Containers["a"].DrainOf().String(); got != "5s" {
		t.Errorf("a's drain %s, want 5s", got)
	}
	if got := m.Containers["b"].DrainOf().String(); got != "10s" {
		t.Errorf("b's drain %s, want its stop grace, 10s", got)
	}
	for _, tt := range []struct{ name, ctr, field, want string }{
		{"no network", "{image: x, update-order: start-first}", "modules.m.containers.c.update-order", "reached through no module network"},
		{"a host port", "{image: x, update-order: start-first, networks: [net], ports: [\"80\"]}", "modules.m.containers.c.update-order", "publishes a host port"},
		{"a writable volume", "{image: x, update-order: start-first, networks: [net], volumes: [\"data:/data\"]}", "modules.m.containers.c.update-order", `volume "data:/data" is writable`},
		{"not an order", "{image: x, update-order: blue-green, networks: [net]}", "modules.m.containers.c.update-order", "blue-green"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("mesh.yaml", []byte(head+"    containers:\n      c: "+tt.ctr+"\n"))
			if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Decode = %v, want %s refused: %s", err, tt.field, tt.want)
			}
		})
	}
	// The module's default, on a container that cannot: the container is named.
	_, err = Decode("mesh.yaml", []byte(head+"    update-order: start-first\n    containers:\n      c: {image: x, ports: [\"80\"], networks: [net]}\n"))
	if err == nil || !strings.Contains(err.Error(), "modules.m.containers.c: cannot be replaced start-first") {
		t.Errorf("Decode = %v, want c refused under the module's start-first", err)
	}
}
