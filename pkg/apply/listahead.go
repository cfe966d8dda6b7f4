package apply

import (
	"context"
	"maps"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// listAhead is an engine whose first list of the state directory's
// containers was asked for ahead. The engine answers it while the pass
// reads the applied state and resolves the desired one. At 1000
// containers the engine takes about 100 ms to answer. The list is still
// made under the state lock, and is the pass's one list.
type listAhead struct {
	engine.Client
	labels map[string]string
	done   chan struct{}
	list   []engine.Container
	err    error
	used   bool
	cancel context.CancelFunc
}

// startList asks eng for the containers of scope, and returns an engine
// whose first such List answers with them. stop cancels the list if no
// List took it, and waits for it to end. So an unused list costs no more
// than its request.
func startList(ctx context.Context, eng engine.Client, scope string) (l *listAhead, stop func()) {
	lctx, cancel := context.WithCancel(ctx)
	l = &listAhead{Client: eng, labels: lifecycle.Managed(scope), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(l.done)
		l.list, l.err = eng.List(lctx, l.labels)
	}()
	return l, func() {
		l.cancel()
		<-l.done
	}
}

// List answers the first list of the labels asked for ahead with that
// list. Any other goes to the engine.
func (l *listAhead) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	if l.used || !maps.Equal(labels, l.labels) {
		return l.Client.List(ctx, labels)
	}
	l.used = true
	select {
	case <-l.done:
		return l.list, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// listsAhead reports whether a pass of f may ask for the list ahead. A
// pass that must first pull a `pull: always` image returns before it
// lists. An apply --last reads its file under the lock.
func listsAhead(opts Options) bool {
	if opts.Last || opts.File == nil {
		return false
	}
	for _, m := range opts.File.Modules {
		for _, c := range m.Containers {
			if c.PullPolicy() == mesh.PullAlways {
				return false
			}
		}
	}
	return true
}
