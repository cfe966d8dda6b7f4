// Package coord is how an apply and a window share the engine.
//
// A window holds containers stopped while its step runs, or changed. A
// changed copy then runs under the name, and the normal one waits aside.
// It records a hold in holds.json and keeps its window lock for its whole
// life. An
// apply plans under the state lock and leaves held containers alone. To
// wait for health without that lock, it claims the containers it changes
// in claims.json and keeps its claim lock meanwhile. The lock names and
// files are in one table (locks.go).
//
// Liveness decides the rest. A window lives while its lock is held, its
// step container runs, or a process of its exec step runs. A hold of a
// window that is none of these is stale. When the engine cannot say, the
// hold reads unknown and stays (fail closed). A mesh window's hold lives
// until etcd says its step is over, wherever that step runs. A claim
// lives while its lock is held.
//
// A claim is honoured two ways. A window whose held containers are
// claimed waits for the claim to end before it records its hold. Another
// apply waits for every live claim before it plans.
//
// The surface follows the protocol's phases:
//
//   - Observe reads the holds and classifies them against one listing;
//     ObserveMesh also asks etcd about dead mesh windows' holds;
//   - RecordEnds records in etcd the end of a dead runner's step;
//   - HealClaims heals what dead applies left half done;
//   - ReleaseStale drops dead windows' holds and brings their containers
//     back;
//   - BringBack ends a hold on one container, for a close and a release;
//   - Unchange ends a changed hold on one container, for the same two.
//
// Healing and releasing stay separate calls. A dry run heals nothing, and
// a refused apply releases nothing.
package coord
