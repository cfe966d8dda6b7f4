package eventcheck

import (
	"testing"
)

func TestDown(t *testing.T) {
	old := svc("o1", "m.a", "m", "a")
	nw := svc("n1", "m.a", "m", "a")
	b := svc("b1", "m.b", "m", "b")
	health := func(ev func(string, float64) Event, detail string, s float64) Event {
		e := ev("health_status", s)
		e.Detail = detail
		return e
	}
	for _, c := range []struct {
		what   string
		events []Event
		want   [][2]float64 // intervals; -1: still down
	}{
		{"created: never down", []Event{nw("create", 0), nw("start", 1)}, nil},
		{"stop-first recreate", []Event{old("kill", 1), old("die", 1.1), nw("start", 2)}, [][2]float64{{1.1, 2}}},
		{"renamed aside, then stopped", []Event{old("rename", 0.5), old("kill", 1), old("die", 1.1), nw("create", 1.5), nw("start", 2)}, [][2]float64{{1.1, 2}}},
		{"start-first: never down", []Event{nw("start", 1), old("kill", 2), old("die", 2.1)}, nil},
		{"down until healthy", []Event{old("die", 1), nw("start", 2), health(nw, "healthy", 3)}, [][2]float64{{1, 3}}},
		{"still down", []Event{old("die", 1)}, [][2]float64{{1, -1}}},
		{"two services, one interval", []Event{old("die", 1), b("die", 1.5), nw("start", 2), b("start", 3)}, [][2]float64{{1, 3}}},
		{"unhealthy is down", []Event{nw("start", 0), health(nw, "healthy", 1), health(nw, "unhealthy", 2), health(nw, "healthy", 3)}, [][2]float64{{2, 3}}},
	} {
		got := Down(c.events, "m")
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.what, got, c.want)
			continue
		}
		for i, w := range c.want {
			still := w[1] < 0
			if !got[i].Start.Equal(at(w[0])) || still != got[i].End.IsZero() || (!still && !got[i].End.Equal(at(w[1]))) {
				t.Errorf("%s: interval %d %v, want %v", c.what, i, got[i], w)
			}
		}
	}
}

func TestMostDown(t *testing.T) {
	iv := func(a, b float64) Interval { return Interval{Start: at(a), End: at(b)} }
	for _, c := range []struct {
		what  string
		hosts map[string][]Interval
		want  int
	}{
		{"one after another", map[string][]Interval{"a": {iv(0, 1)}, "b": {iv(1, 2)}, "c": {iv(2, 3)}}, 1},
		{"two overlap", map[string][]Interval{"a": {iv(0, 1)}, "b": {iv(0.5, 2)}, "c": {iv(2, 3)}}, 2},
		{"all three", map[string][]Interval{"a": {iv(0, 3)}, "b": {iv(1, 3)}, "c": {{Start: at(2)}}}, 3},
		{"none", map[string][]Interval{"a": nil}, 0},
	} {
		if got, _, _ := MostDown(c.hosts); got != c.want {
			t.Errorf("%s: %d down at once, want %d", c.what, got, c.want)
		}
	}
}

func TestExisting(t *testing.T) {
	old := svc("o1", "m.a", "m", "a")
	held := svc("o1", "m.a.meshctl-held", "m", "a")
	cp := svc("c1", "m.a", "m", "a")
	st := step("s1", "m", "gc")
	evs := []Event{old("kill", 1), old("die", 1.1), held("rename", 1.2), cp("create", 1.3), cp("start", 1.4),
		st("create", 2), st("start", 2.1), st("die", 3), cp("die", 3.1), held("start", 3.2)}
	got := Existing(evs, "m")
	if len(got) != 2 || !got[0].Start.IsZero() || !got[0].End.Equal(at(1.1)) || !got[1].Start.Equal(at(3.2)) || !got[1].End.IsZero() {
		t.Fatalf("Existing = %v; want o1 until 1.1, then from 3.2", got)
	}
	steps := StepIntervals(Intervals(evs), "m", "gc")
	if v := HeldDuringStep(got, steps, []string{"m.a"}); len(v) != 0 {
		t.Errorf("the normal container did not run during the step, but: %v", v)
	}
	late := append(evs[:7:7], held("start", 2.5), st("die", 3))
	if v := HeldDuringStep(Existing(late, "m"), StepIntervals(Intervals(late), "m", "gc"), []string{"m.a"}); len(v) != 1 {
		t.Errorf("the normal container ran during the step; violations %v", v)
	}
}
