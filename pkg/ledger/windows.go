package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// MeshWindow is a maintenance window as the mesh sees it: published by its
// host to the etcd that holds the ledger, under a lease that lapses when the
// window's process dies. Holds stay local files: this is for operators, and
// a window works the same with etcd down.
type MeshWindow struct {
	Host     string    `json:"host"`
	Module   string    `json:"module"`
	Step     string    `json:"step"`
	PID      int       `json:"pid"`
	OpenedAt time.Time `json:"opened_at"`
}

// WindowTTL is the lease of a published window: it lapses this long after
// the window's process stops renewing it (killed, or cut off from etcd).
const WindowTTL = 10 * time.Second

// ErrNotEtcd is returned by the mesh views of a ledger kept in files.
var ErrNotEtcd = errors.New("the mesh view needs an etcd ledger (--ledger etcd://HOST:PORT…)")

func (s *etcdStore) windowKey(w MeshWindow) string {
	return fmt.Sprintf("%s/windows/%s/%s/%d", s.cfg.Prefix, w.Host, w.Module, w.PID)
}

// PublishWindow publishes w under a lease of WindowTTL, renewed until stop
// is called (which revokes it) or the process dies (it lapses). The key
// names the host, the module and the pid, so that no window overwrites
// another's.
func (l *Ledger) PublishWindow(ctx context.Context, w MeshWindow) (stop func(), err error) {
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
	ctx, cancel := context.WithTimeout(ctx, attempt)
	defer cancel()
	lease, err := cli.Grant(ctx, int64(WindowTTL/time.Second))
	if err != nil {
		return nil, s.failed(err)
	}
	if _, err := cli.Put(ctx, s.windowKey(w), string(b), clientv3.WithLease(lease.ID)); err != nil {
		return nil, s.failed(err)
	}
	kctx, kcancel := context.WithCancel(context.Background())
	ch, err := cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		kcancel()
		return nil, s.failed(err)
	}
	go func() {
		for range ch { // drain the renewals
		}
	}()
	return func() {
		kcancel()
		rctx, rcancel := context.WithTimeout(context.Background(), attempt)
		defer rcancel()
		_, _ = cli.Revoke(rctx, lease.ID) // else it lapses by itself
	}, nil
}

// MeshWindows returns every host's published windows, by host and module,
// from one linearizable read.
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
		resp, err := cli.Get(ctx, s.cfg.Prefix+"/windows/", clientv3.WithPrefix())
		if err != nil {
			return false, err
		}
		out = out[:0]
		for _, kv := range resp.Kvs {
			var w MeshWindow
			if err := json.Unmarshal(kv.Value, &w); err != nil {
				return false, &corruptError{Key: string(kv.Key), Err: err}
			}
			out = append(out, w)
		}
		return true, nil
	})
	sort.Slice(out, func(i, j int) bool {
		if out[i].Host != out[j].Host {
			return out[i].Host < out[j].Host
		}
		return out[i].Module < out[j].Module
	})
	return out, err
}
