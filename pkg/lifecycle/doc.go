// Package lifecycle is how meshctl creates, replaces, stops and brings back
// a container, for apply and window alike:
//
//   - enginespec.go: the labels, and the spec the engine gets (EngineSpec)
//     or has recorded (SpecDiff);
//   - executor.go: create, and recreate with put-back (Executor.Recreate,
//     Executor.PutBack): how a container is replaced;
//   - health.go: the health wait a new or restarted container must pass;
//   - listing.go: the one engine listing (Observe, StepRunning);
//   - release.go: the windows as that listing classifies them
//     (ObserveWindows) and the release of dead windows' holds
//     (Windows.Release), which brings their containers back as a close
//     would;
//   - order.go: the depends-on order of a run of changes.
package lifecycle
