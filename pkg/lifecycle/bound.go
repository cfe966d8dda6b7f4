package lifecycle

import (
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// ChangeBound is how long an apply may take to change d once its image is at
// hand. It adds the old container's stop grace, the new one's health gate and
// a start-first drain. A claim older than the sum over its containers may be
// stuck; a younger one is work in progress.
func ChangeBound(d *Desired) time.Duration {
	if d == nil {
		// Nothing is known of it: the defaults, and an image's healthcheck.
		return StopTimeout + healthBudget(&engine.Healthcheck{}) + StopTimeout
	}
	return d.Def.StopGrace() + gateBound(d) + d.Def.DrainOf()
}

// gateBound is the longest the health gate may wait for d. Without a declared
// healthcheck the image may still have one, so the engine's default budget
// applies.
func gateBound(d *Desired) time.Duration {
	h := d.Def.Healthcheck
	switch {
	case h == nil:
		return max(healthBudget(&engine.Healthcheck{}), DefaultSettle)
	case h.Disable:
		return DefaultSettle
	}
	return max(healthBudget(&engine.Healthcheck{Interval: h.Interval.Std(), Timeout: h.Timeout.Std(),
		StartPeriod: h.StartPeriod.Std(), Retries: h.Retries}), DefaultSettle)
}
