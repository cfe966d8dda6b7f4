package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// meshAllFile is module m with one container app and a step gc. where is
// the step's mesh field, "" for none. budget sets max-unavailable when
// above 0.
func meshAllFile(t testing.TB, where string, budget int, cmd string) *mesh.File {
	t.Helper()
	var b strings.Builder
	b.WriteString("modules:\n  m:\n")
	if budget > 0 {
		fmt.Fprintf(&b, "    max-unavailable: %d\n", budget)
	}
	fmt.Fprintf(&b, "    containers:\n      app: {image: %s}\n    steps:\n      gc:\n        while-stopped: [app]\n        run: {command: [%s]}\n", busybox, cmd)
	if where != "" {
		fmt.Fprintf(&b, "        mesh: %s\n", where)
	}
	f, err := mesh.Decode("mesh.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestMeshAllMember: a module with a mesh: all step and no budget is a
// member of the mesh. Its record has max-unavailable 0 and its steps'
// hashes. It is written only when it changes, and removed once the
// module has no mesh: all step. A file ledger refuses it, touching
// nothing.
func TestMeshAllMember(t *testing.T) {
	h := meshHosts(t, 1)[0]
	ctx := context.Background()
	_, err := run(t, h.d, h.eng, meshAllFile(t, "all", 0, "gc"), nil)
	var fe *fault.Error
	if !errors.As(err, &fe) || fe.Kind != fault.BadInput ||
		!strings.Contains(err.Error(), "mesh: all (module m, step gc) needs an etcd ledger shared by the hosts: set --ledger etcd://") {
		t.Fatalf("file ledger: %v; want mesh: all of m refused (bad input)", err)
	}
	if n := len(h.eng.Containers()); n != 0 {
		t.Fatalf("a refused apply left %d containers", n)
	}

	if err := h.apply(t, meshAllFile(t, "all", 0, "gc"), time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := h.l.Mesh(ctx, "m")
	if err != nil || len(st.Members) != 1 {
		t.Fatalf("members %+v, %v; want h1's", st.Members, err)
	}
	first := st.Members[0]
	if first.Host != "h1" || first.MaxUnavailable != 0 || first.Steps["gc"] == "" {
		t.Errorf("member %+v; want h1, max-unavailable 0, gc's hash", first)
	}

	h.store.calls.Store(0)
	if err := h.apply(t, meshAllFile(t, "all", 0, "gc"), time.Second); err != nil {
		t.Fatal(err)
	}
	if n := h.store.calls.Load(); n != 0 {
		t.Errorf("a no-op apply made %d etcd calls, want none", n)
	}

	// The step changes: the record does, once.
	if err := h.apply(t, meshAllFile(t, "all", 0, "gc2"), time.Second); err != nil {
		t.Fatal(err)
	}
	if n := h.store.calls.Load(); n != 1 {
		t.Errorf("a changed step made %d etcd calls, want 1 (its member record)", n)
	}
	if st, _ := h.l.Mesh(ctx, "m"); len(st.Members) != 1 || st.Members[0].Steps["gc"] == first.Steps["gc"] {
		t.Errorf("after the step changed: %+v; want a new hash of gc", st.Members)
	}

	// A budget beside the mesh: all step is in the record; dropped, it
	// is 0 again, and the module stays a member.
	for _, budget := range []int{2, 0} {
		if err := h.apply(t, meshAllFile(t, "all", budget, "gc2"), time.Second); err != nil {
			t.Fatal(err)
		}
		if st, _ := h.l.Mesh(ctx, "m"); len(st.Members) != 1 || st.Members[0].MaxUnavailable != budget {
			t.Errorf("max-unavailable %d: members %+v; want h1's with %d", budget, st.Members, budget)
		}
	}

	// mesh: host and no budget: the module leaves the mesh.
	if err := h.apply(t, meshAllFile(t, "host", 0, "gc2"), time.Second); err != nil {
		t.Fatal(err)
	}
	if st, _ := h.l.Mesh(ctx, "m"); len(st.Members) != 0 {
		t.Errorf("after mesh: host: members %+v, want none", st.Members)
	}
}
