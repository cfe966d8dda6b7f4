// Package claims lets an apply wait on the engine without the state lock.
//
// An apply plans under the state lock. If it changes containers, it claims
// them before it unlocks: it takes the OS lock "claim-ID" (held for the
// claim's life, so a claim whose process died is seen dead at once) and
// records the claim in claims.json. It then creates, recreates, removes and
// waits for health with the state lock released, so a wait of minutes for
// one module's container holds up no other module's window and no window's
// close. It takes the state lock again to record its result and drop the
// claim.
//
// What honours a claim: a window whose held containers are claimed waits
// for the claim to end before it records its hold (and so before it stops
// anything); another apply waits for every live claim before it plans.
package claims
