package coord

import (
	"fmt"
	"maps"
	"slices"

	"github.com/meshctl/meshctl/pkg/state"
)

// AddHold records hold h beside the holds of w, under lock. A window's
// open calls it once Observe, HealClaims and ReleaseStale are done.
func AddHold(lock *state.Lock, w *Windows, h Hold) error {
	w.Holds.Holds = append(w.Holds.Holds, h)
	return lock.Write(HoldsFile, &w.Holds)
}

// CloseHold drops the hold of window e.ID and appends e to the history,
// under lock. The hold stays on the containers of notBack, without its
// step container. Once the window's process is gone, that hold reads
// stale, and the next release brings them back. It returns the entry it
// appended, nil when the holds could not be read.
func CloseHold(lock *state.Lock, e Entry, notBack []string) (*Entry, error) {
	hd, hist, err := ReadHolds(lock.Read)
	if err != nil {
		return nil, err
	}
	h, ok := hd.Find(e.ID)
	hd.Drop(e.ID)
	if ok && len(notBack) > 0 {
		h.Containers, h.StepContainer = notBack, ""
		h.Deferred = slices.DeleteFunc(h.Deferred, func(n string) bool { return !slices.Contains(notBack, n) })
		maps.DeleteFunc(h.Changed, func(n string, _ Changed) bool { return !slices.Contains(notBack, n) })
		hd.Holds = append(hd.Holds, h)
	}
	hist.Append(e)
	if err := lock.Write(HoldsFile, &hd); err != nil {
		return &e, err
	}
	return &e, lock.Write(HistoryFile, &hist)
}

// RecordChanged records, under lock, the id of the changed container the
// open of window id created for name. The close and a stale release then
// remove that container and no other. A hold that is gone is an error.
func RecordChanged(lock *state.Lock, id, name, changedID string) error {
	var hd HoldsDoc
	if _, err := lock.Read(HoldsFile, &hd); err != nil {
		return err
	}
	for i := range hd.Holds {
		if h := &hd.Holds[i]; h.ID == id {
			c := h.Changed[name]
			c.ID = changedID
			h.Changed[name] = c
			return lock.Write(HoldsFile, &hd)
		}
	}
	return fmt.Errorf("window %s: its hold is no longer recorded", id)
}

// RecordDeferred records in the holds the changes an apply deferred, under
// lock. deferred maps a window's id to the containers whose change waits
// for its close. An apply calls it as it records its result. A window
// whose hold is gone is skipped.
func RecordDeferred(lock *state.Lock, deferred map[string][]string) error {
	if len(deferred) == 0 {
		return nil
	}
	var hd HoldsDoc
	if _, err := lock.Read(HoldsFile, &hd); err != nil {
		return err
	}
	changed := false
	for i := range hd.Holds {
		h := &hd.Holds[i]
		for _, name := range deferred[h.ID] {
			if !slices.Contains(h.Deferred, name) {
				h.Deferred = append(h.Deferred, name)
				changed = true
			}
		}
		slices.Sort(h.Deferred)
	}
	if !changed {
		return nil
	}
	return lock.Write(HoldsFile, &hd)
}

// DeferredIn returns what the hold of window id records as deferred, read
// with read. A hold that is gone has nothing deferred.
func DeferredIn(read func(string, state.Document) (bool, error), id string) ([]string, error) {
	var hd HoldsDoc
	if _, err := read(HoldsFile, &hd); err != nil {
		return nil, err
	}
	h, _ := hd.Find(id)
	return h.Deferred, nil
}

// ReadHistory reads the window history alone with read.
func ReadHistory(read func(string, state.Document) (bool, error)) (History, error) {
	var hist History
	_, err := read(HistoryFile, &hist)
	return hist, err
}

// WriteHistory writes the window history, under lock.
func WriteHistory(lock *state.Lock, hist *History) error {
	return lock.Write(HistoryFile, hist)
}

// HoldKept reports whether a hold of process pid on module is still
// recorded in d. A close that could not bring everything back keeps it.
// A holds file that cannot be read counts as kept (fail closed).
func HoldKept(d *state.Dir, module string, pid int) bool {
	doc, _, err := ReadHolds(d.Read)
	if err != nil {
		return true
	}
	return slices.ContainsFunc(doc.Holds, func(h Hold) bool { return h.Module == module && h.PID == pid })
}

// Gone returns the windows of views whose hold d no longer records.
func Gone(d *state.Dir, views []View) ([]View, error) {
	doc, _, err := ReadHolds(d.Read)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(slices.Clone(views), func(v View) bool {
		_, held := doc.Find(v.ID)
		return held
	}), nil
}
