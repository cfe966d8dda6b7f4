package window

import (
	"context"
	"io"
	"strings"
	"sync"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/pkg/state"
)

// LogLimit is how much of a step's output is kept, from its tail. A step
// of hours may say a lot, and the state directory must stay small.
const LogLimit = 256 << 10

// LogDir is the subdirectory of the state directory that keeps the step
// logs, one file per window in the history (window-logs/ID.json).
const LogDir = "window-logs"

// Log is a window's kept step output.
type Log struct {
	state.Header
	ID     string `json:"id"`
	Module string `json:"module"`
	Step   string `json:"step"`
	// Truncated is set when the step said more than LogLimit. Output is
	// then its tail.
	Truncated bool   `json:"truncated"`
	Output    string `json:"output"`
}

func logName(id string) string { return LogDir + "/" + id + ".json" }

// ReadLog returns the kept step output of window id, or of the last
// window that closed when id is "".
func ReadLog(d *state.Dir, id string) (*Log, error) {
	_, hist, err := coord.ReadHolds(d.Read)
	if err != nil {
		return nil, err
	}
	if id == "" {
		if len(hist.Windows) == 0 {
			return nil, fault.New(fault.BadInput, "no window has closed in %s yet", d.Path())
		}
		id = hist.Windows[len(hist.Windows)-1].ID
	}
	if !strings.HasPrefix(id, "w-") || strings.ContainsAny(id, "/\\.") {
		return nil, fault.New(fault.BadInput, "%q is not a window id (w-…): see meshctl window list", id)
	}
	var l Log
	ok, err := d.Read(logName(id), &l)
	if err != nil {
		return nil, err
	}
	if !ok {
		if hist.Has(id) {
			return nil, fault.New(fault.BadInput, "window %s kept no step log (its step did not run, or it died before its close)", id)
		}
		return nil, fault.New(fault.BadInput, "unknown window %s: see meshctl window list", id)
	}
	return &l, nil
}

// saveLog keeps a window's step output beside the history, under the state
// lock, and removes the logs of windows the history no longer has.
func saveLog(ctx context.Context, d *state.Dir, opts state.LockOptions, l *Log) error {
	lock, err := d.Lock(ctx, coord.StateLock, opts)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	if err := lock.Write(logName(l.ID), l); err != nil {
		return err
	}
	_, hist, err := coord.ReadHolds(lock.Read)
	if err != nil {
		return err
	}
	names, err := d.List(LogDir, ".json")
	if err != nil {
		return err
	}
	for _, n := range names {
		id := strings.TrimSuffix(n, ".json")
		if id != l.ID && !hist.Has(id) {
			if err := lock.Remove(logName(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// teeWriter writes to w and keeps a copy in tail. Errors of w, such as a
// closed stderr, are w's own and stop neither.
type teeWriter struct {
	mu   sync.Mutex
	w    io.Writer
	tail *Tail
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.tail.Write(p)
	_, _ = t.w.Write(p)
	return len(p), nil
}
