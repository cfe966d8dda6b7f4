package faultproxy

import (
	"fmt"
	"math/rand/v2"
	"path"
	"regexp"
	"strings"
	"time"
)

// Rule says which calls to fault and how.
type Rule struct {
	// Method matches the HTTP method. "" matches any.
	Method string
	// Route is a path.Match pattern over Route's result, such as
	// "/containers/{id}/stop" or "/containers/{id}/*". "" matches any.
	Route string
	// Nth faults only the Nth call (1-based) this rule matches. With Nth 0,
	// each matching call is faulted with probability Prob, or 1 when Prob is
	// 0.
	Nth  int
	Prob float64
	// Times caps how many faults the rule injects. Zero is no cap.
	Times int
	Class Class
	// Delay is how long a Delay fault waits.
	Delay time.Duration
	// Status is a Fail fault's HTTP status. Zero means 500.
	Status int

	seen, fired int
}

// String names the rule as a test log shows it.
func (r Rule) String() string {
	s := fmt.Sprintf("%s %s %s", r.Class, orAny(r.Method), orAny(r.Route))
	if r.Nth > 0 {
		s += fmt.Sprintf(" #%d", r.Nth)
	}
	if r.Class == Delay {
		s += " " + r.Delay.String()
	}
	return s
}

func orAny(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func (r *Rule) matches(method, route string) bool {
	if r.Method != "" && r.Method != method {
		return false
	}
	if r.Route == "" {
		return true
	}
	ok, err := path.Match(r.Route, route)
	return err == nil && ok
}

// Schedule is an ordered list of rules with a seeded random source. The same
// seed and the same calls give the same faults. The first rule that matches a
// call and fires decides its fault.
type Schedule struct {
	rules []*Rule
	rng   *rand.Rand
}

// NewSchedule returns a schedule of rules drawing from seed.
func NewSchedule(seed uint64, rules ...Rule) *Schedule {
	s := &Schedule{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, r := range rules {
		r.seen, r.fired = 0, 0
		s.rules = append(s.rules, &r)
	}
	return s
}

// Rules returns the schedule's rules.
func (s *Schedule) Rules() []Rule {
	out := make([]Rule, len(s.rules))
	for i, r := range s.rules {
		out[i] = *r
	}
	return out
}

// next returns the rule that faults this call, if any. The caller holds
// the proxy's lock.
func (s *Schedule) next(method, route string) (Rule, bool) {
	// Every matching rule counts the call, even those after the one that
	// faults it. So each rule's ordinals are its own.
	var matching []*Rule
	for _, r := range s.rules {
		if r.matches(method, route) {
			r.seen++
			matching = append(matching, r)
		}
	}
	for _, r := range matching {
		if (r.Times > 0 && r.fired >= r.Times) || !s.fires(r) {
			continue
		}
		r.fired++
		return *r, true
	}
	return Rule{}, false
}

func (s *Schedule) fires(r *Rule) bool {
	if r.Nth > 0 {
		return r.seen == r.Nth
	}
	return r.Prob == 0 || s.rng.Float64() < r.Prob
}

var (
	versionPrefix = regexp.MustCompile(`^/v[0-9]+(\.[0-9]+)?/`)
	// Fixed second segments that are not ids.
	fixedSecond = map[string]bool{"json": true, "create": true, "prune": true, "load": true, "search": true, "get": true}
)

// Route names the API call a path makes. It strips the API version. It
// replaces the container, image, network or volume named by {id}. So
// "/v1.41/containers/ab12/stop" becomes "/containers/{id}/stop". And
// "/images/meshtest/busybox:1/json" becomes "/images/{id}/json".
func Route(p string) string {
	if loc := versionPrefix.FindStringIndex(p); loc != nil {
		p = p[loc[1]-1:]
	}
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	if len(segs) < 2 || fixedSecond[segs[1]] {
		return p
	}
	switch segs[0] {
	case "images", "distribution", "plugins":
		// Image names hold slashes. So the id is all but a known last word.
		last := segs[len(segs)-1]
		if len(segs) > 2 && (last == "json" || last == "history" || last == "push" || last == "tag" || last == "get") {
			return "/" + segs[0] + "/{id}/" + last
		}
		return "/" + segs[0] + "/{id}"
	case "containers", "networks", "volumes", "exec", "services", "tasks", "secrets", "configs", "nodes":
		segs[1] = "{id}"
	}
	return "/" + strings.Join(segs, "/")
}
