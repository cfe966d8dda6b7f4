package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/state"
)

// Changing is a live apply's claim on containers it is changing.
type Changing struct {
	PID        int       `json:"pid"`
	Containers []string  `json:"containers"`
	Since      time.Time `json:"since"`
	// Deadline is when the claim's work should be done. It is the claim's
	// start plus, over its containers, the stop grace, the health gate's
	// bound and the drain.
	Deadline time.Time `json:"deadline"`
	// Stuck is set once the deadline has passed: the apply still runs, but
	// its work may be stuck.
	Stuck bool `json:"stuck"`
}

// changing reads the live claims, each with its deadline. The bound of a
// container comes from the applied record, or the defaults when it has none.
func changing(d *state.Dir, desired []lifecycle.Desired, now time.Time) ([]Changing, error) {
	live, err := coord.LiveClaims(d, d.Read)
	if err != nil {
		return nil, err
	}
	byName := map[string]*lifecycle.Desired{}
	for i := range desired {
		byName[desired[i].Name] = &desired[i]
	}
	out := []Changing{}
	for _, c := range live {
		var bound time.Duration
		for _, n := range c.Containers {
			bound += lifecycle.ChangeBound(byName[n])
		}
		deadline := c.Since.Add(bound)
		out = append(out, Changing{PID: c.PID, Containers: c.Containers, Since: c.Since,
			Deadline: deadline, Stuck: now.After(deadline)})
	}
	return out, nil
}

// markChanging marks the containers a live claim changes, within its
// deadline. A replacement's aside containers (NAME.meshctl-old, -new,
// -retiring) are part of the change too.
func markChanging(rep *Report) {
	names := map[string]string{}
	for _, c := range rep.Changing {
		if c.Stuck {
			continue
		}
		why := fmt.Sprintf("apply (pid %d) is changing it", c.PID)
		for _, n := range c.Containers {
			for _, name := range []string{n, lifecycle.OldName(n), lifecycle.NewName(n), lifecycle.RetiringName(n)} {
				names[name] = why
			}
		}
	}
	for i := range rep.Containers {
		c := &rep.Containers[i]
		if why, ok := names[c.Name]; ok {
			c.Changing = true
			c.Reasons = append(c.Reasons, why)
		}
	}
}

// stuckClaims lists the live claims past their deadline as problems. The
// apply still runs, so a person looks before anything is killed.
func stuckClaims(cs []Changing) []string {
	var out []string
	for _, c := range cs {
		if c.Stuck {
			out = append(out, fmt.Sprintf("apply (pid %d) has been changing %s since %s, past its bound (%s): it may be stuck; look at it before you stop it",
				c.PID, strings.Join(c.Containers, ", "), state.When(c.Since), state.When(c.Deadline)))
		}
	}
	return out
}
