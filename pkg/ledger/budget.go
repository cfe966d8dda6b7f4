//go:build !noetcd

package ledger

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func (s *etcdStore) meshKey(kind, module, host string) string {
	k := s.cfg.Prefix + "/mesh/" + kind + "/"
	if module != "" {
		k += module + "/"
	}
	return k + host
}

func (l *Ledger) etcd() (*etcdStore, *clientv3.Client, error) {
	s, ok := l.st.(*etcdStore)
	if !ok {
		return nil, nil, ErrNotEtcd
	}
	cli, err := s.client()
	if err != nil {
		return nil, nil, err
	}
	return s, cli, nil
}

// kv is the store's client as its transactions see it. Tests lose answers
// there (wrapKV).
func (s *etcdStore) kv() clientv3.KV {
	if s.wrapKV != nil {
		return s.wrapKV(s.cli)
	}
	return s.cli
}

// PutMember records that m.Host runs m.Module, with its budget and steps.
func (l *Ledger) PutMember(ctx context.Context, m Member) error {
	s, cli, err := l.etcd()
	if err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := cli.Put(ctx, s.meshKey("members", m.Module, m.Host), string(b))
		return err == nil, err
	})
}

// RemoveMember removes the record that host runs module.
func (l *Ledger) RemoveMember(ctx context.Context, module, host string) error {
	s, cli, err := l.etcd()
	if err != nil {
		return err
	}
	return s.retry(ctx, func(ctx context.Context) (bool, error) {
		_, err := cli.Delete(ctx, s.meshKey("members", module, host))
		return err == nil, err
	})
}

// Mesh returns the members and slots of module, or of every module when
// module is "". It is one linearizable read.
func (l *Ledger) Mesh(ctx context.Context, module string) (MeshState, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return MeshState{}, err
	}
	var out MeshState
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Txn(ctx).Then(
			clientv3.OpGet(s.meshPrefix("members", module), clientv3.WithPrefix()),
			clientv3.OpGet(s.meshPrefix("slots", module), clientv3.WithPrefix())).Commit()
		if err != nil {
			return false, err
		}
		out, err = decodeMesh(resp)
		return err == nil, err
	})
	return out, err
}

// meshPrefix is the key prefix of one kind of mesh record for module, or
// for every module when module is "".
func (s *etcdStore) meshPrefix(kind, module string) string {
	if module == "" {
		return s.cfg.Prefix + "/mesh/" + kind + "/"
	}
	return s.cfg.Prefix + "/mesh/" + kind + "/" + module + "/"
}

func decodeMesh(resp *clientv3.TxnResponse) (MeshState, error) {
	var out MeshState
	for i, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			var err error
			if i == 0 {
				var m Member
				err = json.Unmarshal(kv.Value, &m)
				out.Members = append(out.Members, m)
			} else {
				var sl Slot
				err = json.Unmarshal(kv.Value, &sl)
				out.Slots = append(out.Slots, sl)
			}
			if err != nil {
				return MeshState{}, corrupt(string(kv.Key), err)
			}
		}
	}
	sort.Slice(out.Members, func(i, j int) bool {
		return out.Members[i].Module+"/"+out.Members[i].Host < out.Members[j].Module+"/"+out.Members[j].Host
	})
	sort.Slice(out.Slots, func(i, j int) bool {
		return out.Slots[i].Module+"/"+out.Slots[i].Host < out.Slots[j].Module+"/"+out.Slots[j].Host
	})
	return out, nil
}

// TakeSlot tries once to take sl's slot within a budget of own hosts down.
// The budget that holds is the smallest of own and the members' published
// ones. A host that already has a slot of the module keeps it, and sl
// replaces it. Its earlier holder on that host died, or gave it to sl.
//
// The try reads the members and slots at one revision. Its write commits
// only if no slot key was created and no member key changed since. So two
// hosts never both take the last slot. A lost compare reads again. A lost
// answer is tried again, and then finds the slot its own.
func (l *Ledger) TakeSlot(ctx context.Context, sl Slot, own int) (Budget, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return Budget{}, err
	}
	b, err := json.Marshal(sl)
	if err != nil {
		return Budget{}, err
	}
	key := s.meshKey("slots", sl.Module, sl.Host)
	members, slots := s.meshPrefix("members", sl.Module), s.meshPrefix("slots", sl.Module)
	var out Budget
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Txn(ctx).Then(clientv3.OpGet(members, clientv3.WithPrefix()), clientv3.OpGet(slots, clientv3.WithPrefix())).Commit()
		if err != nil {
			return false, err
		}
		st, err := decodeMesh(resp)
		if err != nil {
			return false, err
		}
		out = Budget{Rev: resp.Header.Revision, Limit: limitOf(own, st.Members)}
		var mine *clientv3.Cmp
		for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
			if string(kv.Key) == key {
				c := clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)
				mine = &c
			}
		}
		for _, h := range st.Slots {
			if h.Host != sl.Host {
				out.Holders = append(out.Holders, h)
			}
		}
		if mine == nil && len(out.Holders) >= out.Limit {
			return true, nil // full: the caller waits
		}
		if mine == nil {
			c := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
			mine = &c
		}
		cmps := []clientv3.Cmp{*mine,
			clientv3.Compare(clientv3.CreateRevision(slots), "<", out.Rev+1).WithPrefix(),
			clientv3.Compare(clientv3.ModRevision(members), "<", out.Rev+1).WithPrefix()}
		tr, err := s.kv().Txn(ctx).If(cmps...).Then(clientv3.OpPut(key, string(b))).Commit()
		if err != nil {
			return false, err
		}
		out.Taken = tr.Succeeded
		if !tr.Succeeded {
			out.Holders = nil
		}
		return tr.Succeeded, nil
	})
	if err != nil {
		return Budget{}, err
	}
	if out.Taken {
		out.Holders = nil
	}
	return out, nil
}

// limitOf is the smallest budget of own and the members' published ones.
func limitOf(own int, members []Member) int {
	limit := own
	for _, m := range members {
		if m.MaxUnavailable > 0 && (limit <= 0 || m.MaxUnavailable < limit) {
			limit = m.MaxUnavailable
		}
	}
	return max(limit, 1)
}

// WaitSlots returns once a slot or member of module changed after rev, or
// after at most poll. A wait that missed an event then tries again anyway.
func (l *Ledger) WaitSlots(ctx context.Context, module string, rev int64, poll time.Duration) error {
	s, cli, err := l.etcd()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, poll)
	defer cancel()
	ch := cli.Watch(clientv3.WithRequireLeader(ctx), s.cfg.Prefix+"/mesh/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for resp := range ch {
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if strings.HasPrefix(k, s.meshPrefix("slots", module)) || strings.HasPrefix(k, s.meshPrefix("members", module)) {
				return nil
			}
		}
		if resp.Err() != nil {
			return nil
		}
	}
	return ctx.Err()
}

// GiveBackSlot removes host's slot of module, if token still holds it. An
// empty token removes it whoever holds it (mesh release). It reports
// whether a slot was removed.
func (l *Ledger) GiveBackSlot(ctx context.Context, module, host, token string) (bool, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return false, err
	}
	key := s.meshKey("slots", module, host)
	var removed bool
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Get(ctx, key)
		if err != nil {
			return false, err
		}
		if len(resp.Kvs) == 0 {
			return true, nil
		}
		var sl Slot
		if err := json.Unmarshal(resp.Kvs[0].Value, &sl); err != nil {
			return false, corrupt(key, err)
		}
		if token != "" && sl.Token != token {
			return true, nil // another process of that host holds it now
		}
		tr, err := s.kv().Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)).
			Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			return false, err
		}
		removed = tr.Succeeded
		return tr.Succeeded, nil
	})
	return removed, err
}

// ForgetHost removes every member record and slot of host, in one
// transaction. It returns what it removed.
func (l *Ledger) ForgetHost(ctx context.Context, host string) (MeshState, error) {
	s, cli, err := l.etcd()
	if err != nil {
		return MeshState{}, err
	}
	var gone MeshState
	err = s.retry(ctx, func(ctx context.Context) (bool, error) {
		resp, err := cli.Txn(ctx).Then(
			clientv3.OpGet(s.meshPrefix("members", ""), clientv3.WithPrefix()),
			clientv3.OpGet(s.meshPrefix("slots", ""), clientv3.WithPrefix())).Commit()
		if err != nil {
			return false, err
		}
		all, err := decodeMesh(resp)
		if err != nil {
			return false, err
		}
		gone = MeshState{}
		var cmps []clientv3.Cmp
		var ops []clientv3.Op
		for _, m := range all.Members {
			if m.Host == host {
				gone.Members = append(gone.Members, m)
				k := s.meshKey("members", m.Module, host)
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "<", resp.Header.Revision+1))
				ops = append(ops, clientv3.OpDelete(k))
			}
		}
		for _, sl := range all.Slots {
			if sl.Host == host {
				gone.Slots = append(gone.Slots, sl)
				k := s.meshKey("slots", sl.Module, host)
				cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(k), "<", resp.Header.Revision+1))
				ops = append(ops, clientv3.OpDelete(k))
			}
		}
		if len(ops) == 0 {
			return true, nil
		}
		if len(ops) > 120 {
			return false, fault.New(fault.Failed, "host %s has %d mesh records, more than one transaction takes", host, len(ops))
		}
		tr, err := cli.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err != nil {
			return false, err
		}
		return tr.Succeeded, nil
	})
	return gone, err
}
