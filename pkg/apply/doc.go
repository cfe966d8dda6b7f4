// Package apply converges a host's containers to a mesh file (meshctl
// apply). One apply reads as its phases (runLocked, pass.go): under the
// state lock it observes (the applied state, the desired containers
// resolved now, the windows classified with one engine listing), heals
// what an apply that died left aside, plans one action per container
// (Plan, plan.go: the one rule for what apply does to a container, with
// ChangesEngine the one predicate for what changes the engine), releases
// the holds of dead windows (coord.ReleaseStale), executes the plan
// with the lock released under a claim (claim.go, execute.go), and records
// the applied state and the report (package record). Images are pulled
// without the lock (pull.go), and the plan made again after each pull.
//
// How a container is created, replaced with put-back, waited for and
// ordered is package lifecycle's; apply decides which, and when. How apply
// and a window share the engine (holds, claims, the heal and the stale
// release) is package coord's.
package apply
