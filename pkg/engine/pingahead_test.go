package engine

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
)

// countingPinger is a Client whose Ping counts its calls and waits for
// release before answering.
type countingPinger struct {
	Client
	pings   atomic.Int32
	release chan struct{}
	err     error
}

func (c *countingPinger) Ping(ctx context.Context) error {
	c.pings.Add(1)
	<-c.release
	return c.err
}

func TestPingAheadSendsThePingAtOnceAndAnswersTheFirstPingWithIt(t *testing.T) {
	refused := errors.New("engine refused")
	c := &countingPinger{release: make(chan struct{}), err: refused}
	p := PingAhead(t.Context(), c)
	// The ping is on its way before anyone asks for it.
	for c.pings.Load() == 0 {
		select {
		case <-t.Context().Done():
			t.Fatal("PingAhead sent no ping")
		default:
			runtime.Gosched()
		}
	}
	close(c.release)
	if err := p.Ping(t.Context()); !errors.Is(err, refused) {
		t.Fatalf("first Ping = %v, want the early ping's answer %v", err, refused)
	}
	if n := c.pings.Load(); n != 1 {
		t.Fatalf("the first Ping made %d requests, want the one sent ahead", n)
	}
	if err := p.Ping(t.Context()); !errors.Is(err, refused) || c.pings.Load() != 2 {
		t.Fatalf("a second Ping = %v after %d requests, want it to ask the engine again", err, c.pings.Load())
	}
}

func TestPingAheadWaitHonoursItsContext(t *testing.T) {
	c := &countingPinger{release: make(chan struct{})}
	defer close(c.release)
	p := PingAhead(context.Background(), c)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Ping(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ping with a cancelled context = %v, want context.Canceled", err)
	}
}

func TestPingAnsweredWaitsForTheAnswerAndLeavesItToTheFirstPing(t *testing.T) {
	c := &countingPinger{release: make(chan struct{})}
	p := PingAhead(t.Context(), c)
	answered := make(chan bool)
	go func() { answered <- PingAnswered(t.Context(), p) }()
	select {
	case <-answered:
		t.Fatal("PingAnswered returned before the engine answered")
	default:
	}
	close(c.release)
	if !<-answered {
		t.Fatal("PingAnswered = false after a good answer")
	}
	if err := p.Ping(t.Context()); err != nil || c.pings.Load() != 1 {
		t.Fatalf("first Ping after PingAnswered = %v after %d requests, want the answer sent ahead", err, c.pings.Load())
	}
}

func TestPingAnsweredIsFalseForAFailedPingOrNoneSentAhead(t *testing.T) {
	c := &countingPinger{release: make(chan struct{}), err: errors.New("engine refused")}
	close(c.release)
	if PingAnswered(t.Context(), PingAhead(t.Context(), c)) {
		t.Fatal("PingAnswered = true for a refused ping")
	}
	if PingAnswered(t.Context(), c) {
		t.Fatal("PingAnswered = true for a client that sent no ping ahead")
	}
	wait := &countingPinger{release: make(chan struct{})}
	defer close(wait.release)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if PingAnswered(ctx, PingAhead(t.Context(), wait)) {
		t.Fatal("PingAnswered = true with a cancelled context and no answer")
	}
}
