//go:build !noetcd

package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func (s *etcdStore) windowKey(w MeshWindow) string {
	return fmt.Sprintf("%s/windows/%s/%s/%d", s.cfg.Prefix, w.Host, w.Module, w.PID)
}

// openedKey is the window's entry without a lease. It is written with the
// leased one and removed only when the window closes. So a window whose lease
// lapsed still shows, as lapsed.
func (s *etcdStore) openedKey(w MeshWindow) string {
	return fmt.Sprintf("%s/windows-opened/%s/%s/%d", s.cfg.Prefix, w.Host, w.Module, w.PID)
}

// Publication is one published window, with its renewals and the lease they
// renew. The lease is replaced when it lapses. Stop it when the window closed
// and its hold is gone. Leave it when the window ends with its hold kept, as
// after a close that failed closed. Then it lapses and shows as lapsed.
type Publication struct {
	s      *etcdStore
	cli    *clientv3.Client
	w      MeshWindow
	value  string
	warn   func(format string, args ...any)
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	lease  clientv3.LeaseID
}

// PublishWindow publishes w under a lease of WindowTTL. The lease is renewed
// until stop is called, which removes the window. If the process dies, the
// lease lapses and the window shows as lapsed. The key names the host, the
// module and the pid, so no window overwrites another's.
//
// A lease may lapse while the window lives. That happens when etcd is
// unreachable, or the process is stopped, for longer than WindowTTL. Then the
// window is published again on a new lease, with a warning through l.Warnf.
func (l *Ledger) PublishWindow(ctx context.Context, w MeshWindow) (stop func(), err error) {
	p, err := l.Publish(ctx, w)
	if err != nil {
		return nil, err
	}
	return p.Stop, nil
}

// Publish publishes w as PublishWindow does. It returns the publication, to
// Stop or Leave.
func (l *Ledger) Publish(ctx context.Context, w MeshWindow) (*Publication, error) {
	s, ok := l.st.(*etcdStore)
	if !ok {
		return nil, ErrNotEtcd
	}
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, err
	}
	p := &Publication{s: s, cli: cli, w: w, value: string(b), warn: l.warnf, done: make(chan struct{})}
	kctx, cancel := context.WithCancel(context.Background())
	ch, err := p.publish(ctx, kctx)
	if err != nil {
		cancel()
		return nil, s.failed(err)
	}
	p.cancel = cancel
	go p.keep(kctx, ch)
	return p, nil
}

// publish grants a lease and writes the window under it in one transaction.
// The same transaction writes the entry without a lease. Then publish starts
// renewing the lease.
func (p *Publication) publish(ctx, kctx context.Context) (<-chan *clientv3.LeaseKeepAliveResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	lease, err := p.cli.Grant(ctx, int64(WindowTTL/time.Second))
	if err != nil {
		return nil, err
	}
	if _, err := p.cli.Txn(ctx).Then(
		clientv3.OpPut(p.s.windowKey(p.w), p.value, clientv3.WithLease(lease.ID)),
		clientv3.OpPut(p.s.openedKey(p.w), p.value)).Commit(); err != nil {
		return nil, err
	}
	ch, err := p.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.lease = lease.ID
	p.mu.Unlock()
	return ch, nil
}

// keep drains the renewals. Their channel closes when the lease lapsed or
// could not be renewed in time. If the window still lives, keep publishes it
// again on a new lease. It tries every second or so until it can.
func (p *Publication) keep(kctx context.Context, ch <-chan *clientv3.LeaseKeepAliveResponse) {
	defer close(p.done)
	for {
		for range ch {
		}
		if kctx.Err() != nil {
			return
		}
		p.warn("window %s/%s: its lease on the mesh lapsed (etcd unreachable, or this process stopped, for %s): the mesh did not show it; publishing it again\n", p.w.Module, p.w.Step, WindowTTL)
		for n := 1; ; n++ {
			select {
			case <-kctx.Done():
				return
			case <-time.After(time.Duration(min(n, 5)) * time.Second / 2):
			}
			next, err := p.publish(kctx, kctx)
			if err == nil {
				p.warn("window %s/%s: published on the mesh again\n", p.w.Module, p.w.Step)
				ch = next
				break
			}
		}
	}
}

// Stop ends the renewals and removes the window from the mesh. It removes
// both entries and the lease.
func (p *Publication) Stop() {
	p.cancel()
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), attempt)
	defer cancel()
	_, _ = p.cli.Txn(ctx).Then(clientv3.OpDelete(p.s.windowKey(p.w)), clientv3.OpDelete(p.s.openedKey(p.w))).Commit()
	p.mu.Lock()
	lease := p.lease
	p.mu.Unlock()
	_, _ = p.cli.Revoke(ctx, lease) // else it lapses by itself
}

// Leave ends the renewals and leaves the entries, as a SIGKILL does. The
// window lapses within WindowTTL and then shows as lapsed. It shows until its
// host forgets it (ForgetWindow).
func (p *Publication) Leave() {
	p.cancel()
	<-p.done
}

// MeshWindows returns every host's published windows, by host and module. It
// takes them from one linearizable read. It returns those whose lease is
// alive, and those whose lease lapsed without their window closing (Lapsed).
func (l *Ledger) MeshWindows(ctx context.Context) ([]MeshWindow, error) {
	s, ok := l.st.(*etcdStore)
	if !ok {
		return nil, ErrNotEtcd
	}
	cli, err := s.client()
	if err != nil {
		return nil, err
	}
	var out []MeshWindow
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Txn(ctx).Then(
			clientv3.OpGet(s.cfg.Prefix+"/windows/", clientv3.WithPrefix()),
			clientv3.OpGet(s.cfg.Prefix+"/windows-opened/", clientv3.WithPrefix())).Commit()
		if err != nil {
			return false, err
		}
		out = out[:0]
		live := map[string]bool{}
		for i, r := range resp.Responses {
			for _, kv := range r.GetResponseRange().Kvs {
				var w MeshWindow
				if err := json.Unmarshal(kv.Value, &w); err != nil {
					return false, corrupt(string(kv.Key), err)
				}
				k := s.windowKey(w)
				if i == 1 {
					if live[k] {
						continue
					}
					w.Lapsed = true
				}
				live[k] = true
				out = append(out, w)
			}
		}
		return true, nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].PID < out[j].PID
	})
	return out, err
}

// ForgetWindow removes w from the mesh, lapsed or not. The host calls it when
// it released w's hold, its process dead and its step no longer running. Then
// the mesh view stops showing w as lapsed.
func (l *Ledger) ForgetWindow(ctx context.Context, w MeshWindow) error {
	s, ok := l.st.(*etcdStore)
	if !ok {
		return ErrNotEtcd
	}
	cli, err := s.client()
	if err != nil {
		return err
	}
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := cli.Txn(ctx).Then(clientv3.OpDelete(s.windowKey(w)), clientv3.OpDelete(s.openedKey(w))).Commit()
		return err == nil, err
	})
}
