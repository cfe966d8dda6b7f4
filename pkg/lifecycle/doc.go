// Package lifecycle is how meshctl creates, replaces, stops and brings
// back a container: its labels, its spec as the engine gets it, create and
// recreate with put-back, the health wait, stale holds brought back as a
// window's close would, and the depends-on order. The apply command (its
// plan) and the window (its close) both use it.
package lifecycle
