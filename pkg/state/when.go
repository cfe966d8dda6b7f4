package state

import "time"

// When formats t for a table or a message, in local time. It gives the time
// of day alone when t is today, else the date too. So a window opened last
// week does not read as opened this morning.
func When(t time.Time) string {
	return when(t, time.Now())
}

func when(t, now time.Time) string {
	t, now = t.Local(), now.Local()
	if y, m, d := t.Date(); y == now.Year() && m == now.Month() && d == now.Day() {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}
