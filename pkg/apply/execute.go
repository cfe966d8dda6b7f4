package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/record"
)

// execute carries out the plan, independent containers in parallel. Each
// item's outcome is written into its report line. A failed one becomes
// "failed" with its error. A create or recreate whose image is absent fails
// without touching the engine. Stopping the old container, only to find the
// new one cannot be made, would take the service down for nothing. A
// recreate may fail to put the old container back
// (lifecycle.NotPutBackError). That container is handed to keep, the
// claim's Keep, so that the next command heals it.
func execute(ctx context.Context, x lifecycle.Executor, items []Item, absent map[string]string, rep *record.Report, opts Options,
	keep func(name string)) error {
	r := &execution{x: x, items: items, absent: absent, rep: rep, opts: opts, ord: orderOf(items),
		sem: make(chan struct{}, opts.Parallel), keep: keep}
	r.x.Health = r.health
	r.x.Watching = r.unslotted
	var wg sync.WaitGroup
	for i := range items {
		if !items[i].ChangesEngine() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.carryOut(ctx, i)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if len(r.errs) > 0 {
		return &FailedError{Err: errors.Join(r.errs...)}
	}
	return nil
}

// execution is the state one execute's goroutines share.
type execution struct {
	x      lifecycle.Executor
	items  []Item
	absent map[string]string
	rep    *record.Report
	opts   Options
	ord    *lifecycle.Order
	sem    chan struct{} // a slot per container changed at once (--parallel)
	keep   func(name string)

	mu   sync.Mutex // guards errs and rep
	errs []error
}

// health writes the health a container reached into its report line.
func (r *execution) health(name, health string) {
	if r.opts.Status != nil {
		r.opts.Status(name, "health: "+health)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.rep.Containers {
		if r.rep.Containers[i].Name == name {
			r.rep.Containers[i].Health = health
		}
	}
}

// unslotted runs wait, a health wait, without the slot the caller holds.
// It then takes a slot again for what follows, the put-back or the old
// container's removal. So N containers settling at once cost one settle
// period, not one per wave of --parallel. Taking the slot again cannot
// starve. Every slot holder does engine work that ends, or gives its slot
// up the same way.
func (r *execution) unslotted(wait func()) {
	<-r.sem
	defer func() { r.sem <- struct{}{} }()
	wait()
}

// carryOut carries out item i after its dependencies. It holds no slot
// while it waits, since a waiter's slot could starve what it waits for.
func (r *execution) carryOut(ctx context.Context, i int) {
	it := &r.items[i]
	failedDep := r.ord.Wait(ctx, it.Name)
	r.sem <- struct{}{}
	defer func() { <-r.sem }()
	err := ctx.Err()
	switch _, imageAbsent := r.absent[imageOf(it)]; {
	case err != nil:
	case failedDep != "":
		err = &lifecycle.DependencyError{Dep: failedDep, Action: string(it.Action)}
	case imageAbsent && it.Action != Remove:
		err = fmt.Errorf("image %s: %s; %s", it.Desired.Image, r.absent[imageOf(it)], untouched[it.Action])
	default:
		err = r.change(ctx, it)
	}
	if r.opts.Status != nil {
		r.opts.Status(it.Name, doneWord(it.Action, err))
	}
	if err != nil {
		r.failed(i, err)
	}
	// Done only once its report line says so. What waits on it comes after.
	r.ord.Finish(it.Name, err != nil)
}

// change carries out one create, recreate or removal on the engine.
func (r *execution) change(ctx context.Context, it *Item) error {
	if r.opts.Status != nil {
		r.opts.Status(it.Name, progressVerb(it.Action)+"…")
	} else {
		r.opts.Progress("%s %s\n", progressVerb(it.Action), it.Name)
	}
	switch it.Action {
	case Create:
		return r.x.Create(ctx, it.Desired)
	case Recreate:
		return r.x.Recreate(ctx, it.Desired, *it.Observed)
	default:
		return r.x.Remove(ctx, *it.Observed)
	}
}

// failed writes item i's failure into its report line and the errors.
func (r *execution) failed(i int, err error) {
	it := &r.items[i]
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Errorf("%s: %w", it.Name, err))
	if npb := (*lifecycle.NotPutBackError)(nil); errors.As(err, &npb) && r.keep != nil {
		r.keep(it.Name)
	}
	cr := &r.rep.Containers[i]
	if _, ok := r.absent[imageOf(it)]; ok && it.Action != Remove {
		// The image's line in the reasons says why already. The error says
		// only what became of the container.
		cr.Action, cr.Error = Failed, untouched[it.Action]
		return
	}
	if de := (*lifecycle.DependencyError)(nil); errors.As(err, &de) {
		cr.Action, cr.Error = Failed, err.Error()
		return
	}
	msg := engine.Reason(err.Error())
	var he *lifecycle.HealthError
	if errors.As(err, &he) {
		// The reason says how it failed, and the log says why. The error
		// adds only what they do not say, such as "the old container was
		// put back". It does not repeat the reason.
		cr.Reasons = append(cr.Reasons, he.Reason)
		cr.Log = he.Log
		msg = strings.TrimLeft(strings.TrimPrefix(err.Error(), he.Reason), "; ")
	}
	cr.Reasons = append(cr.Reasons, string(it.Action)+" failed")
	cr.Action, cr.Error = Failed, msg
}

// orderOf is the depends-on order of the items that change the engine. A
// create or recreate waits for what it depends on. A removal waits for
// nothing.
func orderOf(items []Item) *lifecycle.Order {
	changing := map[string][]string{}
	for _, it := range items {
		if !it.ChangesEngine() {
			continue
		}
		changing[it.Name] = nil
		if it.Desired != nil && it.Action != Remove {
			changing[it.Name] = it.Desired.Def.Dependencies(it.Module)
		}
	}
	return lifecycle.NewOrder(changing)
}

// untouched says what became of a container whose image is absent.
var untouched = map[Action]string{Create: "not created", Recreate: "the old container was left as it was"}

func imageOf(it *Item) string {
	if it.Desired == nil {
		return ""
	}
	return it.Desired.Image
}

// doneWord is a container's line once its action is done.
func doneWord(action Action, err error) string {
	switch {
	case err != nil:
		return string(action) + " failed"
	case action == Create:
		return "created"
	case action == Recreate:
		return "recreated"
	default:
		return "removed"
	}
}

func progressVerb(action Action) string {
	switch action {
	case Create:
		return "creating"
	case Recreate:
		return "recreating"
	default:
		return "removing"
	}
}
