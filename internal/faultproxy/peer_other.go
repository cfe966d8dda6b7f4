//go:build !linux

package faultproxy

import "net"

// peerPID returns 0: only Linux says who is at the other end.
func peerPID(net.Conn) int { return 0 }
