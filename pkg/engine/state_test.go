package engine

import (
	"testing"
	"time"
)

func TestStateOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		c    Container
		want RunState
	}{
		{"running", Container{State: "running", Running: true}, Running},
		{"paused", Container{State: "paused", Running: true}, Running},
		{"exited", Container{State: "exited"}, Stopped},
		{"created", Container{State: "created"}, Stopped},
		{"engine restarting", Container{State: "restarting", Running: true}, Restarting},
		{"inspect restarting", Container{State: "running", Running: true, Restarting: true}, Restarting},
		{"restarted, young", Container{State: "running", Running: true, RestartCount: 3, StartedAt: now.Add(-time.Second)}, Restarting},
		{"restarted, settled", Container{State: "running", Running: true, RestartCount: 3, StartedAt: now.Add(-Settle)}, Running},
		{"never restarted, young", Container{State: "running", Running: true, StartedAt: now.Add(-time.Second)}, Running},
		{"restarted, start unknown", Container{State: "running", Running: true, RestartCount: 1}, Running},
		{"restarted, stopped", Container{State: "exited", RestartCount: 2, StartedAt: now.Add(-time.Second)}, Stopped},
	} {
		if got := StateOf(tc.c, now); got != tc.want {
			t.Errorf("%s: StateOf = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestRestartedLately(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	long := now.Add(-time.Hour)
	for _, tc := range []struct {
		status  string
		created time.Time
		want    bool
	}{
		{"Up Less than a second", long, true},
		{"Up 1 second", long, true},
		{"Up 2 seconds (healthy)", long, true},
		{"Up 2 seconds (Paused)", long, true},
		{"Up 2 seconds", now.Add(-3 * time.Second), false},
		{"Up 1 second", now.Add(-5 * time.Second), false},
		{"Up 1 second", now.Add(-7 * time.Second), true},
		{"Up 3 seconds", long, false},
		{"Up 59 seconds", long, false},
		{"Up About a minute", long, false},
		{"Up 5 minutes (health: starting)", long, false},
		{"Restarting (1) 2 seconds ago", long, false},
		{"Exited (0) 1 second ago", long, false},
		{"", long, false},
	} {
		if got := restartedLately(tc.status, tc.created, now); got != tc.want {
			t.Errorf("restartedLately(%q, %s) = %v, want %v", tc.status, now.Sub(tc.created), got, tc.want)
		}
	}
}
