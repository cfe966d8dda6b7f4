package ledger

import (
	"strings"
	"testing"
	"time"
)

// TestHolderNamesTimes: a slot's holder is named with the time of day
// when it was taken today, and with the date too when not, as every time
// meshctl prints (a dead holder's slot may be days old).
func TestHolderNamesTimes(t *testing.T) {
	today := time.Now().Truncate(time.Second)
	old := time.Date(2024, 1, 1, 3, 31, 2, 0, time.Local)
	got := HolderNames([]Slot{{Host: "b", PID: 2, TakenAt: old}, {Host: "a", PID: 1, TakenAt: today}})
	want := "a (pid 1, since " + today.Format("15:04:05") + "), b (pid 2, since 2024-01-01 03:31:02)"
	if got != want {
		t.Errorf("HolderNames = %q\nwant %q", got, want)
	}
	if strings.Count(got, "2024-01-01") != 1 {
		t.Errorf("HolderNames = %q: want the date on the old slot only", got)
	}
}
