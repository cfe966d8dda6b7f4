package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// DependencyError is a container left untouched because a container it
// depends on (depends-on) failed to change.
type DependencyError struct {
	Dep    string
	Action string
}

func (e *DependencyError) Error() string {
	return fmt.Sprintf("not touched: dependency %s failed", e.Dep)
}

// Order makes one run of changes follow depends-on. A container is
// created or recreated only once every container it depends on that this
// apply changes is done. Done means healthy too, since Create and Recreate
// wait for that. Containers with no path between them still change in
// parallel.
type Order struct {
	done map[string]chan struct{}
	deps map[string][]string
	mu   sync.Mutex
	// failed holds the containers whose change failed.
	failed map[string]bool
}

// NewOrder returns the order of one run of changes. Changing maps each
// container that changes to the containers it depends on. It maps one
// that does not wait, such as a removal, to nil.
func NewOrder(changing map[string][]string) *Order {
	o := &Order{done: map[string]chan struct{}{}, deps: map[string][]string{}, failed: map[string]bool{}}
	for name := range changing {
		o.done[name] = make(chan struct{})
	}
	graph := map[string][]string{}
	for name, deps := range changing {
		for _, d := range deps {
			if _, ok := o.done[d]; ok {
				graph[name] = append(graph[name], d)
			}
		}
	}
	o.deps = acyclic(graph)
	return o
}

// acyclic returns graph without the edges that close a cycle. A file's
// cycles are refused at decode. These are the ones that modules applied
// from different files can make together (apply --last). Ordering them is
// impossible, and waiting on them would never end.
func acyclic(graph map[string][]string) map[string][]string {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	out := map[string][]string{}
	var visit func(n string)
	visit = func(n string) {
		color[n] = grey
		for _, m := range graph[n] {
			if color[m] == grey {
				continue // a back edge: drop it
			}
			out[n] = append(out[n], m)
			if color[m] == white {
				visit(m)
			}
		}
		color[n] = black
	}
	for _, n := range sortedNames(graph) {
		if color[n] == white {
			visit(n)
		}
	}
	return out
}

func sortedNames(graph map[string][]string) []string {
	names := make([]string, 0, len(graph))
	for n := range graph {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Wait waits until every dependency of name that this run changes is
// done. It returns the first that failed, "" when none did.
func (o *Order) Wait(ctx context.Context, name string) string {
	for _, d := range o.deps[name] {
		select {
		case <-o.done[d]:
		case <-ctx.Done():
			return ""
		}
		o.mu.Lock()
		failed := o.failed[d]
		o.mu.Unlock()
		if failed {
			return d
		}
	}
	return ""
}

// Finish marks name's change done, failed or not.
func (o *Order) Finish(name string, failed bool) {
	o.mu.Lock()
	o.failed[name] = failed
	o.mu.Unlock()
	if ch, ok := o.done[name]; ok {
		close(ch)
	}
}

// DependencyOrder returns names ordered so that each comes after the
// names it depends on, else in the order given. Deps gives the
// dependencies of a name. One not in names is ignored. A window's close
// brings its held containers back in this order.
func DependencyOrder(names []string, deps func(name string) []string) []string {
	in := map[string]bool{}
	for _, n := range names {
		in[n] = true
	}
	graph := map[string][]string{}
	for _, n := range names {
		for _, d := range deps(n) {
			if in[d] {
				graph[n] = append(graph[n], d)
			}
		}
	}
	graph = acyclic(graph)
	var out []string
	seen := map[string]bool{}
	var visit func(n string)
	visit = func(n string) {
		if seen[n] {
			return
		}
		seen[n] = true
		for _, d := range graph[n] {
			visit(d)
		}
		out = append(out, n)
	}
	for _, n := range names {
		visit(n)
	}
	return out
}
