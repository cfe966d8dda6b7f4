package engine_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// TestNoAnswerIsBounded: an engine that takes a request and never answers
// it (a dockerd with a stuck container) ends the request at its bound, a
// *NoAnswerError, instead of leaving the command, and the state lock it
// may hold, waiting for ever. A wait for a container's exit is not bounded:
// it ends with its context.
func TestNoAnswerIsBounded(t *testing.T) {
	defer engine.SetCallTimeout(200 * time.Millisecond)()
	sock := filepath.Join(t.TempDir(), "mute.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var mu sync.Mutex
	var conns []net.Conn
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	c, err := engine.New("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for what, call := range map[string]func() error{
		"inspect": func() error { _, err := c.Inspect(ctx, "x"); return err },
		"list":    func() error { _, err := c.List(ctx, map[string]string{"a": "b"}); return err },
		"rename":  func() error { return c.Rename(ctx, "x", "y") },
	} {
		var na *engine.NoAnswerError
		if err := call(); !errors.As(err, &na) || ctx.Err() != nil {
			t.Errorf("%s against an engine that never answers: %v, want a NoAnswerError before the test's own deadline", what, err)
		}
	}
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if _, err := c.Wait(wctx, "x"); errors.As(err, new(*engine.NoAnswerError)) || wctx.Err() == nil {
		t.Errorf("wait: %v, want it to last until its own context ended", err)
	}
}
