package engine

import (
	"context"
	"fmt"
	"sync"
)

// PingAhead sends c's ping now, in the background, and returns c with its
// first Ping answered by that one: a command that has work to do before it
// needs the engine (reading its files) waits for the engine's answer no
// longer than that work lasts. The ping is the same one request, sent
// earlier; a later Ping asks again. c must not be used for anything else
// until the ping has been answered (the first Ping, or PingAnswered), which
// the ping's negotiation of the API version needs.
func PingAhead(ctx context.Context, c Client) Client {
	p := &pingAhead{Client: c, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = c.Ping(ctx)
	}()
	return p
}

type pingAhead struct {
	Client
	done chan struct{}
	err  error
	used sync.Once
}

func (p *pingAhead) Ping(ctx context.Context) error {
	first := false
	p.used.Do(func() { first = true })
	if !first {
		return p.Client.Ping(ctx)
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return fmt.Errorf("ping: %w", ctx.Err())
	}
}

// PingAnswered waits for the answer to the ping c sent ahead (PingAhead),
// without taking it: c's first Ping still returns it. It reports whether
// the engine answered it well. It is false at once for a c that sent no
// ping ahead, and when ctx ends first.
func PingAnswered(ctx context.Context, c Client) bool {
	p, ok := c.(*pingAhead)
	if !ok {
		return false
	}
	select {
	case <-p.done:
		return p.err == nil
	case <-ctx.Done():
		return false
	}
}
