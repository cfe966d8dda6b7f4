// Package eventcheck is test support: it follows a Docker engine's own
// event stream (GET /events on the real engine, never through a proxy) and
// checks what happened from it rather than from what meshctl reported:
// which containers ran when, and so whether a held container ran while its
// step ran, or two containers of one service ran at once.
package eventcheck
