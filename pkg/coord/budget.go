package coord

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/ledger"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// MeshFile records what this host last wrote to the mesh in etcd. Those
// are its member records and the slots it may hold. It changes only under
// MeshLock, held for a read and a write at most.
const MeshFile = "mesh.json"

// MeshLock guards MeshFile.
const MeshLock = "mesh"

// BudgetLock is the OS lock a process holds while it may hold a slot. A
// slot recorded in MeshFile whose lock is free belongs to a dead process.
func BudgetLock(token string) string { return "budget-" + token }

// MeshDoc is the mesh.json document.
type MeshDoc struct {
	state.Header
	// Members are the member records this host last wrote, by module.
	Members map[string]ledger.Member `json:"members,omitempty"`
	// Slots are the slots this host may hold in etcd, by module. Each is
	// recorded before it is taken, and dropped once it is given back.
	Slots map[string]ledger.Slot `json:"slots,omitempty"`
}

// MeshStore is the etcd side of the budget. *ledger.Ledger is one.
type MeshStore interface {
	PutMember(ctx context.Context, m ledger.Member) error
	RemoveMember(ctx context.Context, module, host string) error
	TakeSlot(ctx context.Context, sl ledger.Slot, own int) (ledger.Budget, error)
	WaitSlots(ctx context.Context, module string, rev int64, poll time.Duration) error
	GiveBackSlot(ctx context.Context, module, host, token string) (bool, error)
}

// Budget takes and gives back this host's slots of modules that set
// max-unavailable. It also writes the host's member records. It works
// outside the state lock, and never waits under it.
type Budget struct {
	Dir   *state.Dir
	Store MeshStore // nil when the ledger is files
	Host  string
	// Wait bounds the wait for a slot (--lock-timeout).
	Wait     time.Duration
	Now      func() time.Time
	Progress func(format string, args ...any)

	token string
	alive *state.Lock
	held  map[string]ledger.Slot
}

// errNoMesh refuses a budget without an etcd ledger (exit 2).
func errNoMesh(modules []string) error {
	return fault.New(fault.BadInput, "max-unavailable (module %s) needs an etcd ledger shared by the hosts: set --ledger etcd://HOST:PORT[,HOST:PORT…] (or MESHCTL_LEDGER); nothing was changed",
		strings.Join(modules, ", "))
}

// Check refuses modules with a budget when there is no etcd ledger.
func (b *Budget) Check(modules []string) error {
	if len(modules) > 0 && (b == nil || b.Store == nil) {
		return errNoMesh(modules)
	}
	return nil
}

// CheckFile refuses a file whose modules use the mesh when there is no
// etcd ledger. It names each module and the field that needs etcd.
func (b *Budget) CheckFile(f *mesh.File) error {
	if b != nil && b.Store != nil {
		return nil
	}
	var uses []string
	for _, name := range f.MeshModules() {
		m := f.Modules[name]
		if m.Budget() > 0 {
			uses = append(uses, fmt.Sprintf("max-unavailable (module %s)", name))
		}
		if steps := m.MeshSteps(); len(steps) > 0 {
			uses = append(uses, fmt.Sprintf("mesh: all (module %s, step %s)", name, strings.Join(steps, ", ")))
		}
	}
	switch len(uses) {
	case 0:
		return nil
	case 1:
		return fault.New(fault.BadInput, "%s needs an etcd ledger shared by the hosts: set --ledger etcd://HOST:PORT[,HOST:PORT…] (or MESHCTL_LEDGER); nothing was changed", uses[0])
	}
	return fault.New(fault.BadInput, "%s need an etcd ledger shared by the hosts: set --ledger etcd://HOST:PORT[,HOST:PORT…] (or MESHCTL_LEDGER); nothing was changed",
		strings.Join(uses, "; "))
}

// Holds reports whether this process holds module's slot.
func (b *Budget) Holds(module string) bool {
	_, ok := b.held[module]
	return ok
}

// HeldModules are the modules whose slot this process holds, in order.
func (b *Budget) HeldModules() []string {
	var out []string
	for m := range b.held {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// StepHashes are the hashes of module m's step definitions, by step.
func StepHashes(m *mesh.Module) map[string]string {
	if m == nil || len(m.Steps) == 0 {
		return nil
	}
	out := map[string]string{}
	for n, s := range m.Steps {
		j, _ := json.Marshal(s)
		sum := sha256.Sum256(j)
		out[n] = hex.EncodeToString(sum[:8])
	}
	return out
}

// Publish writes this host's member records of the modules f names. A
// module that uses the mesh is recorded: it has a budget or a mesh: all
// step. Its record's MaxUnavailable is 0 when it has no budget. One that
// no longer uses it, or removed, loses its record. Only records that
// differ from MeshFile are written. So an apply that changes none makes no
// etcd call. Modules f does not name are left.
func (b *Budget) Publish(ctx context.Context, f *mesh.File, removed []string) error {
	lock, err := b.Dir.Lock(ctx, MeshLock, state.LockOptions{Timeout: b.Wait, What: "mesh record lock"})
	if err != nil {
		return err
	}
	defer lock.Unlock()
	var doc MeshDoc
	if _, err := lock.Read(MeshFile, &doc); err != nil {
		return err
	}
	if doc.Members == nil {
		doc.Members = map[string]ledger.Member{}
	}
	changed := false
	var errs []error
	puts, removed := b.memberChanges(doc, f, removed)
	for _, want := range puts {
		if b.Store == nil {
			return b.CheckFile(&mesh.File{Modules: map[string]*mesh.Module{want.Module: f.Modules[want.Module]}})
		}
		want.UpdatedAt = b.Now().UTC()
		if err := b.Store.PutMember(ctx, want); err != nil {
			errs = append(errs, err)
			continue
		}
		doc.Members[want.Module], changed = want, true
	}
	for _, name := range removed {
		old, had := doc.Members[name]
		if !had {
			continue
		}
		if b.Store == nil {
			b.Progress("module %s: its member record in etcd stays (the ledger is files now); remove it with meshctl mesh forget %s\n", name, old.Host)
			continue
		}
		if err := b.Store.RemoveMember(ctx, name, old.Host); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(doc.Members, name)
		changed = true
	}
	if changed {
		errs = append(errs, lock.Write(MeshFile, &doc))
	}
	return errors.Join(errs...)
}

// memberChanges are the member records of f's modules that differ from
// doc, and the modules whose record goes. Those are the removed ones and
// the ones that no longer use the mesh, each recorded in doc.
func (b *Budget) memberChanges(doc MeshDoc, f *mesh.File, removed []string) (puts []ledger.Member, gone []string) {
	for _, name := range f.ModuleNames() {
		m := f.Modules[name]
		old, had := doc.Members[name]
		if !m.UsesMesh() {
			if had {
				removed = append(removed, name)
			}
			continue
		}
		want := ledger.Member{Host: b.Host, Module: name, MaxUnavailable: m.Budget(), Steps: StepHashes(m)}
		if had && old.Host == want.Host && old.MaxUnavailable == want.MaxUnavailable && maps.Equal(old.Steps, want.Steps) {
			continue
		}
		puts = append(puts, want)
	}
	for _, name := range removed {
		if _, had := doc.Members[name]; had && !slices.Contains(gone, name) {
			gone = append(gone, name)
		}
	}
	return puts, gone
}

// Pending says which member records an apply of f would write, and
// which it would remove. It reads MeshFile as it is, with no lock, and
// makes no etcd call: a dry run shows it.
func (b *Budget) Pending(f *mesh.File, removed []string) (puts []ledger.Member, gone []string, err error) {
	var doc MeshDoc
	if _, err := b.Dir.Read(MeshFile, &doc); err != nil {
		return nil, nil, err
	}
	puts, gone = b.memberChanges(doc, f, removed)
	return puts, gone, nil
}

// SlotBusyError is a slot not had within the wait (exit 3). It names the
// hosts that hold the module's budget.
type SlotBusyError struct {
	Module  string
	Limit   int
	Holders []ledger.Slot
	Local   int // the pid of another apply of this host, when it holds it
	Waited  time.Duration
}

func (e *SlotBusyError) Error() string {
	if e.Local != 0 {
		return fmt.Sprintf("module %s: another meshctl of this host (pid %d) holds its slot of the mesh's budget; waited %s", e.Module, e.Local, e.Waited)
	}
	return fmt.Sprintf("module %s: no slot of its budget (max-unavailable %d) within %s: held by %s; once they run healthy again, try again (a holder that died: meshctl mesh release %s HOST)",
		e.Module, e.Limit, e.Waited, ledger.HolderNames(e.Holders), e.Module)
}

// Fault says a slot not had in time is busy.
func (e *SlotBusyError) Fault() fault.Kind { return fault.Busy }

// slotPoll bounds one wait for a change of a module's slots.
const slotPoll = 2 * time.Second

// Take takes module's slot for this host, waiting up to b.Wait. It records
// the slot in MeshFile first, so that a holder that dies leaves it known.
// own is the module's budget in this host's file. bound is how long the
// change may take. A slot not had in time is a *SlotBusyError.
func (b *Budget) Take(ctx context.Context, module string, own int, containers []string, bound time.Duration) error {
	if b.Store == nil {
		return errNoMesh([]string{module})
	}
	if b.Holds(module) {
		return nil
	}
	if err := b.live(ctx); err != nil {
		return err
	}
	start := time.Now()
	now := b.Now()
	sl := ledger.Slot{Host: b.Host, Module: module, Token: b.token, PID: os.Getpid(), TakenAt: now.UTC(),
		Deadline: now.Add(bound).UTC(), Containers: containers}
	if err := b.intend(ctx, sl, start); err != nil {
		return err
	}
	said := false
	for {
		got, err := b.Store.TakeSlot(ctx, sl, own)
		if err != nil {
			// Its answer may be lost: the record stays, and the next apply
			// gives back whatever was taken.
			return fmt.Errorf("module %s: the slot of its budget could not be taken, so nothing of it was taken down: %w", module, err)
		}
		if got.Taken {
			if b.held == nil {
				b.held = map[string]ledger.Slot{}
			}
			b.held[module] = sl
			return nil
		}
		if waited := time.Since(start); waited >= b.Wait || ctx.Err() != nil {
			b.forget(module, sl.Token)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &SlotBusyError{Module: module, Limit: got.Limit, Holders: got.Holders, Waited: b.Wait}
		}
		if !said {
			said = true
			b.Progress("waiting for a slot of module %s (max-unavailable %d): held by %s\n", module, got.Limit, ledger.HolderNames(got.Holders))
		}
		_ = b.Store.WaitSlots(ctx, module, got.Rev, min(slotPoll, b.Wait-time.Since(start)+time.Millisecond))
	}
}

// live takes this process's budget lock, once.
func (b *Budget) live(ctx context.Context) error {
	if b.alive != nil {
		return nil
	}
	var r [8]byte
	rand.Read(r[:])
	b.token = hex.EncodeToString(r[:])
	l, err := b.Dir.Lock(ctx, BudgetLock(b.token), state.LockOptions{})
	if err != nil {
		return err
	}
	b.alive = l
	return nil
}

// intend records sl in MeshFile before it is taken. A slot recorded by a
// live process of this host is waited for. One of a dead process is taken
// over: its host is this one, already counted as down.
func (b *Budget) intend(ctx context.Context, sl ledger.Slot, start time.Time) error {
	for {
		pid, err := b.updateMesh(ctx, func(doc *MeshDoc) (int, bool, error) {
			if old, ok := doc.Slots[sl.Module]; ok && old.Token != sl.Token {
				held, err := b.Dir.Held(BudgetLock(old.Token))
				if err != nil || held {
					return old.PID, false, err
				}
			}
			if doc.Slots == nil {
				doc.Slots = map[string]ledger.Slot{}
			}
			doc.Slots[sl.Module] = sl
			return 0, true, nil
		})
		if err != nil || pid == 0 {
			return err
		}
		if time.Since(start) >= b.Wait {
			return &SlotBusyError{Module: sl.Module, Local: pid, Waited: b.Wait}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// updateMesh changes MeshFile under MeshLock with fn. fn returns a value
// for the caller, and whether to write.
func (b *Budget) updateMesh(ctx context.Context, fn func(doc *MeshDoc) (int, bool, error)) (int, error) {
	lock, err := b.Dir.Lock(ctx, MeshLock, state.LockOptions{Timeout: max(b.Wait, 10*time.Second), What: "mesh record lock"})
	if err != nil {
		return 0, err
	}
	defer lock.Unlock()
	var doc MeshDoc
	if _, err := lock.Read(MeshFile, &doc); err != nil {
		return 0, err
	}
	v, write, err := fn(&doc)
	if err != nil || !write {
		return v, err
	}
	return v, lock.Write(MeshFile, &doc)
}

// forget drops module's slot record if token still has it.
func (b *Budget) forget(module, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = b.updateMesh(ctx, func(doc *MeshDoc) (int, bool, error) {
		if old, ok := doc.Slots[module]; ok && old.Token == token {
			delete(doc.Slots, module)
			return 0, true, nil
		}
		return 0, false, nil
	})
}

// GiveBack gives back the slots of modules that run healthy again. It
// gives back this process's, and those a dead process of this host left.
// A slot that cannot be given back stays recorded, for the next apply. It
// gives back with a fresh bounded context, so a signal does not keep it.
func (b *Budget) GiveBack(ctx context.Context, healthy []string) error {
	if b == nil || b.Store == nil || len(healthy) == 0 {
		return nil
	}
	var doc MeshDoc
	if _, err := b.Dir.Read(MeshFile, &doc); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var errs []error
	for _, m := range healthy {
		sl, ok := doc.Slots[m]
		if !ok {
			continue
		}
		if sl.Token != b.token {
			if held, err := b.Dir.Held(BudgetLock(sl.Token)); err != nil || held {
				continue // another live apply of this host has it
			}
		}
		if _, err := b.Store.GiveBackSlot(ctx, m, sl.Host, sl.Token); err != nil {
			errs = append(errs, fmt.Errorf("module %s: its slot stays held in etcd (the next apply gives it back): %w", m, err))
			continue
		}
		if sl.Token != b.token {
			b.Progress("gave back the slot of module %s that apply (pid %d) left at %s\n", m, sl.PID, state.When(sl.TakenAt))
		}
		delete(b.held, m)
		b.forget(m, sl.Token)
		if sl.Token != b.token {
			if l, ok, _ := b.Dir.TryLock(BudgetLock(sl.Token)); ok {
				_ = l.RemoveLockFile()
				l.Unlock()
			}
		}
	}
	return errors.Join(errs...)
}

// Recorded returns the modules with a slot recorded in MeshFile, and
// whether MeshFile exists. A host that never used the mesh has none.
func (b *Budget) Recorded() ([]string, bool, error) {
	var doc MeshDoc
	ok, err := b.Dir.Read(MeshFile, &doc)
	if err != nil {
		return nil, false, err
	}
	var out []string
	for m := range doc.Slots {
		out = append(out, m)
	}
	slices.Sort(out)
	return out, ok, nil
}

// Close lets go of the budget lock. Slots still held stay recorded, dead
// from now on, for the next apply.
func (b *Budget) Close() {
	if b == nil || b.alive == nil {
		return
	}
	if len(b.held) == 0 {
		_ = b.alive.RemoveLockFile()
	}
	b.alive.Unlock()
	b.alive = nil
}

// RecordedSlots returns the slots recorded in d's MeshFile, from a
// snapshot. Status reads them to report a slot held past its deadline.
func RecordedSlots(d *state.Dir) ([]ledger.Slot, error) {
	var doc MeshDoc
	if _, err := d.Read(MeshFile, &doc); err != nil {
		return nil, err
	}
	var out []ledger.Slot
	for _, sl := range doc.Slots {
		out = append(out, sl)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Module < out[j].Module })
	return out, nil
}
