package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// TestDeaf: an interrupted command is deemed stuck only once the signal is
// deafAfter old and it has held and taken no lock for deafQuiet.
func TestDeaf(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name      string
		signalled time.Duration // ago
		held      int64
		last      time.Duration // ago; 0 = never
		want      bool
	}{
		{"just signalled", 100 * time.Millisecond, 0, 0, false},
		{"signalled long ago, no lock ever", 2 * time.Second, 0, 0, true},
		{"holds a lock (a window closing)", time.Minute, 1, time.Minute, false},
		{"released a lock a moment ago (progressing)", 2 * time.Second, 0, 200 * time.Millisecond, false},
		{"released its last lock long ago", 2 * time.Second, 0, 10 * time.Second, true},
	}
	for _, tt := range tests {
		var last time.Time
		if tt.last > 0 {
			last = now.Add(-tt.last)
		}
		if got := deaf(now, now.Add(-tt.signalled), tt.held, last); got != tt.want {
			t.Errorf("%s: deaf = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// exitRecorder records the exit the watchdog asks for.
type exitRecorder struct {
	mu   sync.Mutex
	code int
	when time.Time
}

func (e *exitRecorder) exit(code int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.code, e.when = code, time.Now()
}

func (e *exitRecorder) get() (int, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.code, e.when
}

// syncBuffer is a bytes.Buffer safe for the watchdog's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestWatchInterrupt: a command stuck after a signal,
// holding no lock, is ended with exit 130 within two seconds, its JSON
// document printed once; one that holds a lock (a window's close) is left
// to finish.
func TestWatchInterrupt(t *testing.T) {
	t.Run("stuck, -o json", func(t *testing.T) {
		var out, errOut syncBuffer
		stdout, stderr := &outputWriter{w: &out}, &outputWriter{w: &errOut}
		env := NewEnv(nil, stdout, stderr)
		env.Global.Output = "json"
		ctx, cancel := context.WithCancel(context.Background())
		var rec exitRecorder
		stop := watchInterrupt(ctx, env, stdout, stderr, rec.exit)
		defer stop()
		signalled := time.Now()
		cancel()
		deadline := time.Now().Add(3 * time.Second)
		for {
			if code, when := rec.get(); code != 0 {
				if code != 130 || when.Sub(signalled) > 2*time.Second {
					t.Fatalf("exit %d after %s, want 130 within 2s", code, when.Sub(signalled))
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("a stuck command was not ended")
			}
			time.Sleep(20 * time.Millisecond)
		}
		var doc struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(out.String()), &doc); err != nil || doc.Error.Code != 130 {
			t.Errorf("stdout %q: want one JSON error document, code 130 (%v)", out.String(), err)
		}
		if !strings.Contains(errOut.String(), "meshctl: interrupted; the command did not end within") {
			t.Errorf("stderr %q", errOut.String())
		}
		// What the command writes afterwards is dropped: one document.
		stdout.Write([]byte(`{"late": true}`))
		if strings.Contains(out.String(), "late") {
			t.Errorf("a write after the last words went through: %q", out.String())
		}
	})

	t.Run("document already printed", func(t *testing.T) {
		var out, errOut syncBuffer
		stdout, stderr := &outputWriter{w: &out}, &outputWriter{w: &errOut}
		env := NewEnv(nil, stdout, stderr)
		env.Global.Output = "json"
		ctx, cancel := context.WithCancel(context.Background())
		var rec exitRecorder
		stop := watchInterrupt(ctx, env, stdout, stderr, rec.exit)
		defer stop()
		stdout.Write([]byte("{\"done\": true}\n"))
		cancel()
		time.Sleep(deafAfter + 4*deafPoll)
		if code, _ := rec.get(); code != 130 {
			t.Fatalf("exit %d, want 130", code)
		}
		if out.String() != "{\"done\": true}\n" {
			t.Errorf("stdout %q: want the command's one document only", out.String())
		}
	})

	t.Run("holding a lock", func(t *testing.T) {
		d, err := state.Open(filepath.Join(t.TempDir(), "state"))
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.Lock(context.Background(), "state", state.LockOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut syncBuffer
		stdout, stderr := &outputWriter{w: &out}, &outputWriter{w: &errOut}
		env := NewEnv(nil, stdout, stderr)
		ctx, cancel := context.WithCancel(context.Background())
		var rec exitRecorder
		stop := watchInterrupt(ctx, env, stdout, stderr, rec.exit)
		defer stop()
		cancel()
		time.Sleep(deafAfter + deafQuiet)
		if code, _ := rec.get(); code != 0 {
			t.Fatalf("a command holding a lock was ended (exit %d)", code)
		}
		l.Unlock()
		time.Sleep(deafQuiet + 4*deafPoll)
		if code, _ := rec.get(); code != 130 {
			t.Fatalf("exit %d once the lock was released and nothing happened, want 130", code)
		}
	})
}
