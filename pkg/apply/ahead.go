package apply

import (
	"context"
	"slices"
	"sync"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/state"
)

// Ahead is the state lock and the engine's list under it, taken as an
// apply starts. The command's reading of its file, and the decode cache's
// lookup, then overlap the engine's answer. At 1000 containers that answer
// takes the engine about 70 ms. The first pass of Run uses both, as if it
// had taken them itself. The lock is taken before the list is asked for,
// so the list is made under it, as every pass's is.
type Ahead struct {
	ready chan struct{} // closed once the lock and list are asked for
	mu    sync.Mutex
	taken bool // by a pass, or dropped
	lock  *state.Lock
	list  *listAhead
	stop  func()
}

// StartAhead takes d's state lock if it is free, and asks eng for the list
// of d's containers under it. It does so in the background, once the ping
// eng sent ahead (engine.PingAhead) is answered: an engine that does not
// answer it gets no list, and the state directory is left alone. It takes
// nothing when the lock is busy or d has no ID yet: Run then takes the
// lock and lists as it would have. The caller drops the Ahead when Run is
// not called, or is called for another file (Drop).
func StartAhead(ctx context.Context, d *state.Dir, eng engine.Client, lock state.LockOptions) *Ahead {
	h := &Ahead{ready: make(chan struct{})}
	go func() {
		defer close(h.ready)
		if !engine.PingAnswered(ctx, eng) {
			return
		}
		scope, ok, err := d.PeekID()
		if err != nil || !ok {
			return
		}
		lock.Timeout = 0 // a busy lock is waited for by the pass, not here
		l, err := d.Lock(ctx, coord.StateLock, lock)
		if err != nil {
			return
		}
		h.lock = l
		h.list, h.stop = startList(ctx, eng, scope)
	}()
	return h
}

// take hands the lock and the list to a pass, once. Both are nil when the
// Ahead took none, or was taken or dropped before.
func (h *Ahead) take() (*state.Lock, *listAhead, func()) {
	if h == nil {
		return nil, nil, nil
	}
	<-h.ready
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken {
		return nil, nil, nil
	}
	h.taken = true
	return h.lock, h.list, h.stop
}

// Drop releases what the Ahead took and no pass used: it cancels the list
// and unlocks. A dropped list still cost its request.
func (h *Ahead) Drop() {
	lock, _, stop := h.take()
	if stop != nil {
		stop()
	}
	if lock != nil {
		lock.Unlock()
	}
}

// aheadable reports whether an apply of opts may use a lock and a list
// taken ahead. Its first pass must list (listsAhead), and nothing before
// that pass may wait on a network: no step image to look for or pull
// (pulls.stepImages), and no member records for etcd (publishFirst).
func aheadable(opts Options) bool {
	if opts.DryRun || !listsAhead(opts) || len(opts.File.MeshModules()) > 0 {
		return false
	}
	return !slices.ContainsFunc(opts.File.ModuleNames(), func(name string) bool {
		for _, st := range opts.File.Modules[name].Steps {
			if st.Run != nil && st.Run.Image != "" {
				return true
			}
		}
		return false
	})
}
