package window

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/state"
)

// LiveEvery is how often at most a running window writes its live log. A
// garbage-collect prints a line per blob, so a write per line would cost more
// than the sweep.
const LiveEvery = time.Second

// LastLineMax is how many characters of a step's last line are shown, its
// control characters escaped.
const LastLineMax = 200

// liveKeep is how long a closed window's live log stays beside its kept
// log. A follower of the window reads the step's last output from it.
const liveKeep = time.Minute

// lineKeep bounds the bytes of a line kept to show its start. No more than
// LastLineMax characters of it are shown, each escaped to at most 6 bytes.
const lineKeep = 8 * LastLineMax

// LiveLog is a running window's step output so far (window-logs/ID.live).
// It is written without the state lock and without fsync. A crash may lose
// it, which loses only progress.
type LiveLog struct {
	state.Header
	ID        string    `json:"id"`
	Module    string    `json:"module"`
	Step      string    `json:"step"`
	StartedAt time.Time `json:"started_at"`
	// StallAfter is the step's stall-after, 0 when off. status --check
	// reads it from here, so an apply mid-window does not change it.
	StallAfter time.Duration `json:"stall_after"`
	// Written counts every byte the step wrote. A follower prints what lies
	// past the bytes it printed.
	Written int64 `json:"written"`
	// Truncated is set when Output is the tail of more.
	Truncated bool   `json:"truncated"`
	Output    string `json:"output"`
	// LastLine is the step's last non-empty line, escaped and cut (LastLine).
	LastLine string `json:"last_line"`
	// LastLineAt is when the step last wrote. It is nil before it has.
	LastLineAt *time.Time `json:"last_line_at"`
	// Ended is set once the step has ended. Output is then all there is.
	Ended bool `json:"ended"`
}

func liveName(id string) string { return LogDir + "/" + id + ".live" }

// liveLog keeps a running window's LiveLog and saves it, at most once per
// LiveEvery. The step's writes mark it dirty. A save happens at a write or
// a tick that comes LiveEvery after the last save.
type liveLog struct {
	mu   sync.Mutex
	now  func() time.Time
	save func(*LiveLog) error
	warn func(format string, args ...any)
	tail *Tail
	doc  LiveLog

	cur     []byte // the line being written, its first lineKeep bytes
	last    []byte // the last whole non-empty line, as cur was
	dirty   bool
	savedAt time.Time
	warned  bool
	stop    func()
}

// newLiveLog returns the live log of window w, which saves into d. tail is
// the step output's kept tail, which the window's teeWriter fills.
func newLiveLog(d *state.Dir, w *window, tail *Tail) *liveLog {
	return &liveLog{
		now:  time.Now,
		save: func(doc *LiveLog) error { return d.WriteLoose(liveName(doc.ID), doc) },
		warn: w.opts.Progress,
		tail: tail,
		doc: LiveLog{ID: w.id, Module: w.module, Step: w.step,
			StallAfter: w.def.StallAfter.Std()},
	}
}

// start saves the live log as the step starts, then once per LiveEvery
// while the step writes, until end.
func (l *liveLog) start() {
	l.mu.Lock()
	l.doc.StartedAt = l.now().UTC()
	l.saveLocked()
	l.mu.Unlock()
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(LiveEvery / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				l.tick()
			}
		}
	}()
	l.stop = func() { close(done); <-stopped }
}

// end saves the live log a last time, with the step ended.
func (l *liveLog) end() {
	if l.stop != nil {
		l.stop()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.doc.Ended = true
	l.saveLocked()
}

// write keeps p in the tail and notes that the step wrote it. It saves the
// live log when the last save is LiveEvery old. The tail and the count of
// bytes written change together, so a follower finds where it stopped.
func (l *liveLog) write(p []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tail.Write(p)
	if len(p) == 0 {
		return
	}
	now := l.now().UTC()
	l.doc.Written += int64(len(p))
	l.doc.LastLineAt = &now
	for _, b := range p {
		switch b {
		case '\n', '\r':
			// A carriage return starts the line over, as a progress bar's.
			if len(l.cur) > 0 {
				l.last, l.cur = append(l.last[:0], l.cur...), l.cur[:0]
			}
		default:
			if len(l.cur) < lineKeep {
				l.cur = append(l.cur, b)
			}
		}
	}
	l.dirty = true
	l.saveIfDue(now)
}

// tick saves the live log if it changed and its last save is LiveEvery old.
// Output the step wrote once and then fell silent is so saved too.
func (l *liveLog) tick() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.saveIfDue(l.now())
}

func (l *liveLog) saveIfDue(now time.Time) {
	if l.dirty && now.Sub(l.savedAt) >= LiveEvery {
		l.saveLocked()
	}
}

func (l *liveLog) saveLocked() {
	line := l.cur
	if len(line) == 0 {
		line = l.last
	}
	l.doc.LastLine = LastLine(line)
	l.doc.Output, l.doc.Truncated = l.tail.String()
	l.savedAt, l.dirty = l.now(), false
	if err := l.save(&l.doc); err != nil && !l.warned {
		// Said once: a full disk would say it every second.
		l.warned = true
		l.warn("warning: the live log of window %s was not written: %v\n", l.doc.ID, err)
	}
}

// LastLine is line as status shows it. Its control characters and bytes
// that are not UTF-8 are escaped, and it is cut to LastLineMax characters,
// an ellipsis last.
func LastLine(line []byte) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		var piece string
		switch {
		case r == utf8.RuneError && size == 1:
			piece = fmt.Sprintf(`\x%02x`, line[i])
		case r == '\t':
			piece = `\t`
		case r < 0x80 && unicode.IsControl(r):
			piece = fmt.Sprintf(`\x%02x`, r)
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			piece = fmt.Sprintf(`\u%04x`, r)
		default:
			piece = string(r)
		}
		i += size
		w := utf8.RuneCountInString(piece)
		// The ellipsis takes the last place when more follows.
		if n+w > LastLineMax || (n+w == LastLineMax && i < len(line)) {
			b.WriteString("…")
			return b.String()
		}
		b.WriteString(piece)
		n += w
	}
	return b.String()
}

// ReadLive returns the live log of window id, if it has one. It returns
// false for a live log that is not id's, which is never shown.
func ReadLive(d *state.Dir, id string) (*LiveLog, bool, error) {
	var l LiveLog
	ok, err := d.Read(liveName(id), &l)
	if err != nil || !ok || l.ID != id {
		return nil, false, err
	}
	return &l, true, nil
}

// OpenView is a window not yet closed, as window list and status show it.
// Beside its hold, it has the step's progress from its live log.
type OpenView struct {
	coord.View
	// Elapsed is how long the window has been open, to the second.
	Elapsed string `json:"elapsed"`
	// LastLine is the step's last line (LiveLog.LastLine), "" before any.
	LastLine string `json:"last_line"`
	// LastLineAt is when the step last wrote, nil before it has.
	LastLineAt *time.Time `json:"last_line_at"`

	live *LiveLog
}

// Progress returns views with their step's progress, read from the live
// logs. A live log is read only for a window whose hold is recorded, so a
// dead window's leftover never reads as a running step. One that cannot be
// read leaves its view without progress, and warn says why.
func Progress(d *state.Dir, views []coord.View, now time.Time, warn func(string, ...any)) []OpenView {
	out := []OpenView{}
	for _, v := range views {
		o := OpenView{View: v, Elapsed: now.Sub(v.OpenedAt).Round(time.Second).String()}
		l, ok, err := ReadLive(d, v.ID)
		switch {
		case err != nil:
			warn("window %s: its progress cannot be shown: %v\n", v.ID, err)
		case ok:
			o.LastLine, o.LastLineAt, o.live = l.LastLine, l.LastLineAt, l
		}
		out = append(out, o)
	}
	return out
}

// Describe is View.Describe with the step's progress.
func (o OpenView) Describe() string {
	s := o.View.Describe() + fmt.Sprintf(", for %s (deadline %s)", o.Elapsed, state.When(o.Deadline))
	if o.LastLineAt != nil {
		s += fmt.Sprintf("; last line at %s: %s", state.When(*o.LastLineAt), o.LastLine)
	}
	return s
}

// Stalled says whether the window's running step has printed nothing for
// its stall-after. The step must still run in a live window (open or
// overdue), since only that one writes its live log. It returns when the
// step last printed, or its start when it never did.
func (o OpenView) Stalled(now time.Time) (since time.Time, stall time.Duration, ok bool) {
	l := o.live
	if l == nil || l.Ended || l.StallAfter <= 0 || (o.State != coord.Open && o.State != coord.Overdue) {
		return time.Time{}, 0, false
	}
	since = l.StartedAt
	if l.LastLineAt != nil {
		since = *l.LastLineAt
	}
	return since, l.StallAfter, now.Sub(since) >= l.StallAfter
}

// removeLeftLive removes the live logs of windows that no longer hold
// their module, and the temp files a killed write left. A closed window's
// is kept liveKeep, for its followers. Call it under the state lock.
func removeLeftLive(lock *state.Lock, d *state.Dir, now time.Time) error {
	holds, hist, err := coord.ReadHolds(lock.Read)
	if err != nil {
		return err
	}
	keep := func(name string) bool {
		id := strings.TrimSuffix(name, ".live")
		if _, held := holds.Find(id); held {
			return true
		}
		for _, e := range hist.Windows {
			if e.ID == id {
				return now.Sub(e.ClosedAt) < liveKeep
			}
		}
		return false
	}
	names, err := d.List(LogDir, ".live")
	if err != nil {
		return err
	}
	for _, n := range names {
		if !keep(n) {
			if err := lock.Remove(LogDir + "/" + n); err != nil {
				return err
			}
		}
	}
	return lock.RemoveLooseTemps(LogDir, keep)
}

// followPoll is how often window logs --follow reads the live log.
const followPoll = 250 * time.Millisecond

// FollowOptions is what Follow writes to and how it waits.
type FollowOptions struct {
	// Print prints output of the step, in order.
	Print func(string)
	// Note says something of the log on stderr, such as a gap.
	Note func(format string, args ...any)
	// Poll is how often to read the live log; followPoll when zero.
	Poll time.Duration
}

// Follow prints window id's step output as it comes, until its window has
// closed. It returns the window's history entry. A window whose process
// died before its close returns an error, and so does a cancelled ctx.
func Follow(ctx context.Context, d *state.Dir, id string, opts FollowOptions) (*coord.Entry, error) {
	if opts.Poll <= 0 {
		opts.Poll = followPoll
	}
	var printed int64
	var lastOut string
	// The close drops the hold, then appends the history: a snapshot
	// between the two finds neither. A window once seen held is looked for
	// a while.
	seen, wasHeld, missed := false, false, 0
	for {
		holds, hist, err := coord.ReadHolds(d.Read)
		if err != nil {
			return nil, err
		}
		_, held := holds.Find(id)
		wasHeld = wasHeld || held
		l, ok, err := ReadLive(d, id)
		if err != nil {
			return nil, err
		}
		if ok {
			seen, lastOut = true, l.Output
			printed = printNew(l, printed, opts)
		}
		if !held {
			entry, found := findEntry(hist, id)
			if !found && (!wasHeld || missed >= 20) {
				return nil, unknownWindow(id)
			}
			if !found {
				missed++
				if err := sleepCtx(ctx, opts.Poll); err != nil {
					return nil, err
				}
				continue
			}
			if ok && l.Ended {
				return entry, nil
			}
			// The live log is gone or was not saved at the end. The kept log
			// says the rest.
			var kept Log
			if ok, err := d.Read(logName(id), &kept); err != nil {
				return nil, err
			} else if ok && (!seen || kept.Output != lastOut) {
				if seen {
					opts.Note("(window %s closed; its kept log follows whole)\n", id)
				}
				opts.Print(kept.Output)
			}
			return entry, nil
		}
		if alive, err := d.Held(coord.WindowLock(id)); err != nil {
			return nil, err
		} else if !alive {
			return nil, fmt.Errorf("window %s died before its close: see meshctl window list", id)
		}
		if err := sleepCtx(ctx, opts.Poll); err != nil {
			return nil, err
		}
	}
}

// sleepCtx waits d, or returns ctx's error once it is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// printNew prints what l has past the printed bytes, and returns the new
// count. Output the live log no longer has, cut from its tail, is noted.
func printNew(l *LiveLog, printed int64, opts FollowOptions) int64 {
	fresh := l.Written - printed
	if fresh <= 0 {
		return printed
	}
	out := l.Output
	if fresh > int64(len(out)) {
		opts.Note("(%d bytes of window %s's output were not seen)\n", fresh-int64(len(out)), l.ID)
		fresh = int64(len(out))
	}
	opts.Print(out[len(out)-int(fresh):])
	return l.Written
}

func findEntry(hist coord.History, id string) (*coord.Entry, bool) {
	for i := range hist.Windows {
		if hist.Windows[i].ID == id {
			return &hist.Windows[i], true
		}
	}
	return nil, false
}
