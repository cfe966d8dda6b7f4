package window

import (
	"context"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/state"
)

// Ack acknowledges failed windows of the history. It takes each window
// named by ids. With no ids, it takes the last window of each module's
// step that failed. An acknowledged window stays in the history and in
// window list. It is no longer a problem for status --check, until the
// step fails again. Ack returns the windows it acknowledged now. One
// acknowledged before is returned as it was. An unknown id, or a window
// that ended ok, is a UsageError, and nothing is written.
func Ack(ctx context.Context, d *state.Dir, opts state.LockOptions, ids []string, now time.Time) ([]coord.Entry, error) {
	lock, err := d.Lock(ctx, coord.StateLock, opts)
	if err != nil {
		return nil, err
	}
	defer lock.Unlock()
	hist, err := coord.ReadHistory(lock.Read)
	if err != nil {
		return nil, err
	}
	idx, err := ackTargets(&hist, ids)
	if err != nil {
		return nil, err
	}
	var out []coord.Entry
	changed := false
	for _, i := range idx {
		if hist.Windows[i].AckedAt == nil {
			at := now.UTC()
			hist.Windows[i].AckedAt = &at
			changed = true
		}
		out = append(out, hist.Windows[i])
	}
	if changed {
		if err := coord.WriteHistory(lock, &hist); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LastFailed returns each step's last window of history, oldest first,
// when that window failed. The order is that in which the steps first appear.
func LastFailed(history []coord.Entry) []coord.Entry {
	var out []coord.Entry
	for _, i := range lastFailed(history) {
		out = append(out, history[i])
	}
	return out
}

// lastFailed is LastFailed as indexes into history.
func lastFailed(history []coord.Entry) []int {
	last := map[string]int{}
	var order []string
	for i, e := range history {
		k := e.Module + "/" + e.Step
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = i
	}
	var idx []int
	for _, k := range order {
		if i := last[k]; history[i].Failed() {
			idx = append(idx, i)
		}
	}
	return idx
}

// ackTargets returns the indexes in hist of the windows to acknowledge.
func ackTargets(hist *coord.History, ids []string) ([]int, error) {
	if len(ids) == 0 {
		return lastFailed(hist.Windows), nil
	}
	var idx []int
	for _, id := range ids {
		i := -1
		for j, e := range hist.Windows {
			if e.ID == id {
				i = j
			}
		}
		switch {
		case i < 0:
			known := make([]string, 0, len(hist.Windows))
			for _, e := range hist.Windows {
				known = append(known, e.ID)
			}
			return nil, fault.New(fault.BadInput, "no window %s in the history (the last %d closed windows)%s", id, coord.HistoryLimit, didYouMean(id, known))
		case !hist.Windows[i].Failed():
			return nil, fault.New(fault.BadInput, "window %s ended ok: there is nothing to acknowledge", id)
		}
		idx = append(idx, i)
	}
	return idx, nil
}
