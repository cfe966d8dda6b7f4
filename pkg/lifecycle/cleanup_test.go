package lifecycle

import (
	"context"
	"testing"
	"time"
)

// TestCleanupEndsAfterASignal: a cleanup context outlives its parent's
// cancellation (a signal), but not for its whole bound: it ends once
// SignalGrace has passed, so an engine call that hangs in a cleanup does
// not keep a signalled command alive for minutes. A
// cleanup made inside it, once it has ended, still has its own time, and
// ends too.
func TestCleanupEndsAfterASignal(t *testing.T) {
	parent, signal := context.WithCancel(context.Background())
	c, cancel := Cleanup(parent, time.Hour)
	defer cancel()
	signal()
	if c.Err() != nil {
		t.Fatal("the cleanup ended with the signal itself: nothing could be cleaned up")
	}
	select {
	case <-c.Done():
	case <-time.After(time.Hour):
		t.Fatal("the cleanup outlived the signal by its own bound")
	}
	inner, cancelInner := Cleanup(c, time.Hour)
	defer cancelInner()
	if inner.Err() != nil {
		t.Fatal("a cleanup made after the one it is made from ended had no time at all")
	}
	select {
	case <-inner.Done():
	case <-time.After(time.Hour):
		t.Fatal("the cleanup inside the cleanup outlived the signal by its own bound")
	}
}
