package lifecycle

import (
	"context"
	"testing"
	"time"
)

// TestCleanupEndsAfterASignal: a cleanup context outlives its parent's
// cancellation (a signal), but not for its whole bound: it ends once
// SignalGrace has passed, so an engine call that hangs in a cleanup does
// not keep a signalled command alive for minutes (issue 17, seed 1710). A
// cleanup made inside it gets no fresh time.
func TestCleanupEndsAfterASignal(t *testing.T) {
	parent, signal := context.WithCancel(context.Background())
	c, cancel := Cleanup(parent, time.Hour)
	defer cancel()
	inner, cancelInner := Cleanup(c, time.Hour)
	defer cancelInner()
	signal()
	if c.Err() != nil {
		t.Fatal("the cleanup ended with the signal itself: nothing could be cleaned up")
	}
	select {
	case <-inner.Done():
	case <-time.After(time.Hour):
		t.Fatal("the cleanup inside the cleanup outlived the signal by its own bound")
	}
	if c.Err() == nil {
		t.Error("the inner cleanup ended, the outer not: the inner had fresh time")
	}
}
