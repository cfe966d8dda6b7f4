package apply

import (
	"fmt"
	"testing"

	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// BenchmarkPlan plans a host of n containers as a no-op apply finds it (all
// running and unchanged, the common case CI hits on every merge), and as a
// busier one: a tenth each recreated, created, held, and orphaned. The
// no-op again with its specs encoded ahead (Input.Encoded) is what an
// apply's plan costs after the engine's answer.
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		for _, mix := range []string{"unchanged", "unchanged-encoded", "mixed"} {
			b.Run(fmt.Sprintf("containers=%d/%s", n, mix), func(b *testing.B) {
				in := benchInput(b, n, mix == "mixed")
				if mix == "unchanged-encoded" {
					in.Encoded = EncodeSpecs(in.Desired)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					items := Plan(in)
					if len(items) < n {
						b.Fatalf("Plan returned %d items for %d containers", len(items), n)
					}
				}
			})
		}
	}
}

func benchInput(b *testing.B, n int, mixed bool) Input {
	b.Helper()
	cs := map[string]*mesh.Container{}
	for i := range n {
		cs[fmt.Sprintf("c%04d", i)] = web()
	}
	desired := want(b, cs)
	in := Input{Desired: desired, Scope: scope, Holds: map[string]HoldRef{}}
	for i, d := range desired {
		c := running(b, d.Container, web())
		switch {
		case !mixed:
		case i%10 == 1: // recreate: env changed
			d.Spec.Env["FOO"] = mesh.HashValue("rotated")
		case i%10 == 2: // create: missing
			continue
		case i%10 == 3: // held
			c = stopped(c)
			in.Holds[d.Name] = HoldRef{Window: "w-1"}
		case i%10 == 4: // orphan: no longer wanted
			c.Name += "-gone"
		}
		in.Observed = append(in.Observed, c)
	}
	if mixed {
		// A step container and a container of another state dir, ignored.
		in.Observed = append(in.Observed,
			withLabel(running(b, "step", web()), lifecycle.LabelRole, lifecycle.RoleStep),
			inScope(running(b, "other", web()), otherScope))
	}
	return in
}
