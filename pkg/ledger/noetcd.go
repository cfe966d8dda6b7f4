//go:build noetcd

package ledger

import (
	"context"
	"errors"
	"time"
)

// This file stands for the etcd client in a build with the tag noetcd, as the
// release's meshctl is built. gRPC's, protobuf's and etcd's packages would cost
// every process about 3 ms at start (docs/performance.md). A command given an
// etcd ledger becomes meshctl-etcd before it reaches the ledger (pkg/cli,
// etcd.go), so nothing here answers in use. Each method answers as a file
// ledger answers in the build with the client: ErrNotEtcd.

// EtcdClient says whether this build has the etcd client.
const EtcdClient = false

// errNoEtcdClient is what opening an etcd ledger returns in this build.
var errNoEtcdClient = errors.New("this meshctl is built without the etcd client (tag noetcd); an etcd ledger is meshctl-etcd's")

// OpenEtcd returns errNoEtcdClient.
func OpenEtcd(EtcdConfig) (*Ledger, error) { return nil, errNoEtcdClient }

// Publication is never made: Publish returns ErrNotEtcd.
type Publication struct{}

// Stop does nothing.
func (p *Publication) Stop() {}

// Leave does nothing.
func (p *Publication) Leave() {}

func (l *Ledger) PublishWindow(context.Context, MeshWindow) (func(), error) { return nil, ErrNotEtcd }
func (l *Ledger) Publish(context.Context, MeshWindow) (*Publication, error) { return nil, ErrNotEtcd }
func (l *Ledger) MeshWindows(context.Context) ([]MeshWindow, error)         { return nil, ErrNotEtcd }
func (l *Ledger) ForgetWindow(context.Context, MeshWindow) error            { return ErrNotEtcd }
func (l *Ledger) PutMember(context.Context, Member) error                   { return ErrNotEtcd }
func (l *Ledger) RemoveMember(context.Context, string, string) error        { return ErrNotEtcd }
func (l *Ledger) Mesh(context.Context, string) (MeshState, error)           { return MeshState{}, ErrNotEtcd }
func (l *Ledger) TakeSlot(context.Context, Slot, int) (Budget, error)       { return Budget{}, ErrNotEtcd }
func (l *Ledger) WaitSlots(context.Context, string, int64, time.Duration) error {
	return ErrNotEtcd
}
func (l *Ledger) GiveBackSlot(context.Context, string, string, string) (bool, error) {
	return false, ErrNotEtcd
}
func (l *Ledger) ForgetHost(context.Context, string) (MeshState, error) {
	return MeshState{}, ErrNotEtcd
}
func (l *Ledger) JoinGathering(context.Context, Join) (Gathered, error) { return nil, ErrNotEtcd }
func (l *Ledger) RecordEnd(context.Context, string, string, StepEnd) error {
	return ErrNotEtcd
}
func (l *Ledger) Gathering(context.Context, string) (Gathering, bool, error) {
	return Gathering{}, false, ErrNotEtcd
}
func (l *Ledger) GatheringByID(context.Context, string, string) (Gathering, bool, error) {
	return Gathering{}, false, ErrNotEtcd
}
func (l *Ledger) Gatherings(context.Context) ([]Gathering, error) { return nil, ErrNotEtcd }
func (l *Ledger) PreviewJoin(context.Context, Join) (JoinPreview, error) {
	return JoinPreview{}, ErrNotEtcd
}
