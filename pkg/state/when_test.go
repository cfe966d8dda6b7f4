package state

import (
	"testing"
	"time"
)

func TestWhen(t *testing.T) {
	now := time.Date(2026, 12, 1, 5, 30, 0, 0, time.Local)
	for _, tt := range []struct {
		t    time.Time
		want string
	}{
		{time.Date(2026, 12, 1, 3, 30, 2, 0, time.Local), "03:30:02"},
		{time.Date(2026, 11, 30, 23, 59, 59, 0, time.Local), "2026-11-30 23:59:59"},
		{time.Date(2025, 12, 1, 3, 30, 2, 0, time.Local), "2025-12-01 03:30:02"},
		{time.Date(2026, 12, 2, 0, 0, 0, 0, time.Local), "2026-12-02 00:00:00"},
	} {
		if got := when(tt.t, now); got != tt.want {
			t.Errorf("when(%v) = %q, want %q", tt.t, got, tt.want)
		}
	}
}
