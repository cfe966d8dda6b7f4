// Package lifecycle is how meshctl creates, replaces and stops a
// container, for apply and window alike. It knows nothing of holds and
// claims. Package coord owns those.
//
//   - enginespec.go has the labels, and the spec the engine gets
//     (EngineSpec) or has recorded (SpecDiff).
//   - executor.go creates a container, and replaces one by a recreate
//     with put-back (Executor.Recreate, Executor.PutBack).
//   - health.go has the health wait a new or restarted container must pass.
//   - order.go has the depends-on order of a run of changes.
package lifecycle
