// Package lifecycle is how meshctl creates, replaces and stops a
// container, for apply and window alike. It knows nothing of holds and
// claims: package coord does.
//
//   - enginespec.go: the labels, and the spec the engine gets (EngineSpec)
//     or has recorded (SpecDiff);
//   - executor.go: create, and recreate with put-back (Executor.Recreate,
//     Executor.PutBack): how a container is replaced;
//   - health.go: the health wait a new or restarted container must pass;
//   - order.go: the depends-on order of a run of changes.
package lifecycle
