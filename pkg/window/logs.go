package window

import (
	"context"
	"io"
	"strings"
	"sync"
	"time"

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
	// Gathering is the mesh window's ID, for a step with mesh: all.
	// Runner is the host that ran its step. On any other host, Output
	// is empty: the step's output is in the runner's log.
	Gathering string `json:"gathering,omitempty"`
	Runner    string `json:"runner,omitempty"`
	// Live is set for a window not yet closed. Output is then what its
	// step wrote so far. It is never written to the file.
	Live bool `json:"-"`
}

func logName(id string) string { return LogDir + "/" + id + ".json" }

// ReadLog returns the kept step output of window id, or of the last
// window that closed when id is "". For a window not yet closed, it
// returns the output so far from its live log, Live set. Its step may not
// have started yet, and then Output is "".
func ReadLog(d *state.Dir, id string) (*Log, error) {
	holds, hist, err := coord.ReadHolds(d.Read)
	if err != nil {
		return nil, err
	}
	if id == "" {
		if len(hist.Windows) == 0 {
			return nil, fault.New(fault.BadInput, "no window has closed in %s yet", d.Path())
		}
		id = hist.Windows[len(hist.Windows)-1].ID
	}
	if !ValidID(id) {
		return nil, fault.New(fault.BadInput, "%q is not a window id (w-…): see meshctl window list", id)
	}
	var l Log
	ok, err := d.Read(logName(id), &l)
	if err != nil || ok {
		return &l, err
	}
	// Only a window whose hold is recorded reads its live log. A dead
	// window's leftover is not its step's output.
	if h, held := holds.Find(id); held {
		l := &Log{ID: id, Module: h.Module, Step: h.Step, Live: true}
		live, ok, err := ReadLive(d, id)
		if err != nil {
			return nil, err
		}
		if ok {
			l.Output, l.Truncated = live.Output, live.Truncated
		}
		return l, nil
	}
	if hist.Has(id) {
		return nil, fault.New(fault.BadInput, "window %s kept no step log (its step did not run, or it died before its close)", id)
	}
	return nil, unknownWindow(id)
}

// ValidID says whether id is written as a window id, and names no other file.
func ValidID(id string) bool {
	return strings.HasPrefix(id, "w-") && !strings.ContainsAny(id, "/\\.")
}

func unknownWindow(id string) error {
	return fault.New(fault.BadInput, "unknown window %s: see meshctl window list", id)
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
	return removeLeftLive(lock, d, time.Now())
}

// teeWriter writes to w and keeps a copy in tail. While the step runs, the
// copy goes through its live log. Errors of w, such as a closed stderr,
// are w's own and stop neither.
type teeWriter struct {
	mu   sync.Mutex
	w    io.Writer
	tail *Tail
	live *liveLog
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live != nil {
		t.live.write(p)
	} else {
		t.tail.Write(p)
	}
	_, _ = t.w.Write(p)
	return len(p), nil
}

// setLive sends the copy through l from now on, or to the tail alone when
// l is nil.
func (t *teeWriter) setLive(l *liveLog) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live = l
}
