// Package apply converges a host's containers to a mesh file (meshctl
// apply). One apply reads as its phases in runLocked (pass.go). It takes
// the state lock and observes the applied state, the desired containers
// resolved now, and the windows, classified with one engine listing. It
// heals what an apply that died left aside. Plan (plan.go) gives each
// container one action. It is the one rule for what apply does to a
// container, and ChangesEngine is the one predicate for what changes the
// engine. The apply then releases the holds of dead windows
// (coord.ReleaseStale). It executes the plan with the lock released, under
// a claim (claim.go, execute.go). Last, package record writes the applied
// state and the report. Images are pulled without the lock (pull.go), and
// the plan is made again after each pull.
//
// Package lifecycle owns how a container is created, replaced with
// put-back, waited for and ordered. Apply decides which, and when. Package
// coord owns how apply and a window share the engine: holds, claims, the
// heal and the stale release.
package apply
