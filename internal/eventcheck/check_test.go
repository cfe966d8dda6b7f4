package eventcheck

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 3, 30, 0, 0, time.UTC)

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func svc(id, name string, module, ctr string) func(action string, s float64) Event {
	return func(action string, s float64) Event {
		l := map[string]string{}
		if module != "" {
			l[labelModule], l[labelContainer] = module, ctr
		}
		return Event{Action: action, ID: id, Name: name, Labels: l, At: at(s)}
	}
}

func step(id, module, name string) func(action string, s float64) Event {
	return func(action string, s float64) Event {
		return Event{Action: action, ID: id, Name: stepPrefix + module + "." + name,
			Labels: map[string]string{labelModule: module, labelRole: roleStep}, At: at(s)}
	}
}

func TestService(t *testing.T) {
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"m.a", map[string]string{labelModule: "m", labelContainer: "a"}, "m.a"},
		{"m.a.meshctl-old", map[string]string{labelModule: "m", labelContainer: "a"}, "m.a"},
		{"m.a.meshctl-old", nil, "m.a"},
		{"m.a", nil, "m.a"},
		{"meshctl-window.m.gc", map[string]string{labelModule: "m", labelRole: roleStep}, "step:m.gc"},
	} {
		if got := Service(c.name, c.labels); got != c.want {
			t.Errorf("Service(%q, %v) = %q, want %q", c.name, c.labels, got, c.want)
		}
	}
}

func TestTwoRunning(t *testing.T) {
	old := svc("o1", "m.a", "m", "a")
	aside := svc("o1", "m.a.meshctl-old", "m", "a")
	nw := svc("n1", "m.a", "m", "a")
	foreign := svc("f1", "m.a", "", "")
	other := svc("x1", "m.b", "m", "b")
	for _, c := range []struct {
		what   string
		events []Event
		bad    bool
	}{
		{"a recreate: old stops, then new starts", []Event{old("start", 0), old("die", 1), aside("rename", 1.1), nw("start", 2)}, false},
		{"a put-back: new dies, then old starts", []Event{nw("start", 0), nw("die", 1), aside("start", 2)}, false},
		{"another service beside", []Event{old("start", 0), other("start", 0.5)}, false},
		{"old put back while new runs", []Event{old("start", 0), old("die", 1), nw("start", 2), aside("start", 3)}, true},
		{"a foreign container under the name", []Event{old("start", 0), foreign("start", 1), foreign("die", 2)}, true},
	} {
		v := TwoRunning(Intervals(c.events))
		if (len(v) > 0) != c.bad {
			t.Errorf("%s: violations %v, want bad=%v", c.what, v, c.bad)
		}
	}
}

func TestHeldDuringStep(t *testing.T) {
	held := svc("h1", "m.reg", "m", "reg")
	st := step("s1", "m", "gc")
	for _, c := range []struct {
		what   string
		events []Event
		bad    bool
	}{
		{"stopped before, started after", []Event{held("start", 0), held("die", 1), st("start", 2), st("die", 3), held("start", 4)}, false},
		{"started mid-step", []Event{held("start", 0), held("die", 1), st("start", 2), held("start", 2.5), st("die", 3)}, true},
		{"never stopped", []Event{held("start", 0), st("start", 2), st("die", 3)}, true},
		{"stopped only after the step began", []Event{held("start", 0), st("start", 2), held("die", 2.1), st("die", 3)}, true},
	} {
		ivs := Intervals(c.events)
		v := HeldDuringStep(ivs, StepIntervals(ivs, "m", "gc"), []string{"m.reg"})
		if (len(v) > 0) != c.bad {
			t.Errorf("%s: violations %v, want bad=%v", c.what, v, c.bad)
		}
		if c.bad && len(v) > 0 && !strings.Contains(v[0].String(), "m.reg") {
			t.Errorf("%s: %v does not name the held container", c.what, v[0])
		}
	}
}

// TestNormalDuringStep: a container of the module that runs its normal spec
// while the step runs on another engine is found. Its changed copy is not,
// nor the normal one once the step died.
func TestNormalDuringStep(t *testing.T) {
	spec := func(ev func(string, float64) Event, s string) func(string, float64) Event {
		return func(action string, at float64) Event {
			e := ev(action, at)
			e.Labels[labelSpec] = s
			return e
		}
	}
	normal := spec(svc("o1", "m.a", "m", "a"), "N")
	held := spec(svc("o1", "m.a.meshctl-held", "m", "a"), "N")
	changed := spec(svc("c1", "m.a", "m", "a"), "C")
	recreated := spec(svc("r1", "m.a", "m", "a"), "N")
	other := spec(svc("x1", "x.a", "x", "a"), "N")
	st := step("s1", "m", "gc")
	steps := StepIntervals(Intervals([]Event{st("start", 2), st("die", 3)}), "m", "gc")
	for _, c := range []struct {
		what   string
		events []Event
		bad    int
	}{
		{"held through the step", []Event{normal("start", 0), normal("die", 1), held("rename", 1.1), held("start", 3.5)}, 0},
		{"changed copy serves", []Event{normal("start", 0), normal("die", 1), changed("start", 1.5), changed("die", 3.1), normal("start", 3.2)}, 0},
		{"never held", []Event{normal("start", 0)}, 1},
		{"held, started mid-step", []Event{normal("start", 0), normal("die", 1), held("start", 2.5)}, 1},
		{"recreated mid-step", []Event{normal("start", 0), normal("die", 1), recreated("create", 2.2), recreated("start", 2.3)}, 1},
		{"another module", []Event{other("start", 0)}, 0},
	} {
		v := NormalDuringStep("host-b", c.events, "m", []string{"N"}, steps)
		if len(v) != c.bad {
			t.Errorf("%s: violations %v, want %d", c.what, v, c.bad)
		}
		for _, x := range v {
			if !strings.Contains(x.String(), "host host-b") {
				t.Errorf("%s: %v does not name the host", c.what, x)
			}
		}
	}
}
