// Package eventcheck is test support that follows a Docker engine's own event
// stream. It reads GET /events on the real engine, never through a proxy. It
// checks what happened from those events, not from what meshctl reported. It
// tells which containers ran when. So it finds a held container that ran
// while its step ran, or two containers of one service that ran at once.
package eventcheck
