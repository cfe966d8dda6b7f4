package mesh

import (
	"slices"
	"strings"
)

// dependencies checks every depends-on of f. Each names a container of its
// own module ("name") or of another ("module.name"), and not itself. Together
// they make no cycle. A module the file does not name may be depended on.
// Another file applied it, and it is converged already.
func (v *validator) dependencies(f *File) {
	type node = string
	edges := map[node][]node{}
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		if m == nil {
			continue
		}
		for _, cn := range m.ContainerNames() {
			c := m.Containers[cn]
			if c == nil {
				continue
			}
			self := EngineName(mn, cn)
			seen := map[string]bool{}
			for i, dep := range c.DependsOn {
				p := []string{"modules", mn, "containers", cn, "depends-on", index(i)}
				full, ok := DependencyName(mn, dep)
				switch {
				case !ok:
					v.fail(p, "%q is not a container name: write NAME (this module) or MODULE.NAME", dep)
					continue
				case full == self:
					v.fail(p, "%q is the container itself", dep)
					continue
				case seen[full]:
					v.fail(p, "%q listed twice", dep)
					continue
				}
				seen[full] = true
				dm, dc, _ := strings.Cut(full, ".")
				if other, named := f.Modules[dm]; named && other != nil {
					if _, ok := other.Containers[dc]; !ok && !v.undecoded("modules", dm, "containers", dc) {
						v.fail(p, "unknown container %q (module %s has: %s)%s", dep, dm, containerList{other}, didYouMean{dc, other})
						continue
					}
					edges[self] = append(edges[self], full)
				}
			}
		}
	}
	if cycle := findCycle(edges); cycle != nil {
		mn, cn, _ := strings.Cut(cycle[0], ".")
		v.fail([]string{"modules", mn, "containers", cn, "depends-on"}, "dependency cycle: %s", strings.Join(cycle, " → "))
	}
}

// DependencyName returns the engine name of dep as written in module's
// container. A bare "name" is module.name.
func DependencyName(module, dep string) (string, bool) {
	if m, c, ok := strings.Cut(dep, "."); ok {
		return dep, ValidName(m) && ValidName(c)
	}
	return EngineName(module, dep), ValidName(dep)
}

// Dependencies returns the engine names the container depends on.
func (c *Container) Dependencies(module string) []string {
	var out []string
	for _, d := range c.DependsOn {
		if n, ok := DependencyName(module, d); ok {
			out = append(out, n)
		}
	}
	return out
}

// findCycle returns a cycle of edges, its first node repeated at the end, or
// nil. Nodes are visited in order, so the same cycle is named every time.
func findCycle(edges map[string][]string) []string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		for _, m := range edges[n] {
			switch color[m] {
			case grey:
				i := slices.Index(stack, m)
				found = append(slices.Clone(stack[i:]), m)
				return true
			case white:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, n := range sortedKeys(edges) {
		if color[n] == white && visit(n) {
			return found
		}
	}
	return nil
}
