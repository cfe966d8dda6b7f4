package mesh

import (
	"fmt"
	"strings"
	"time"
)

// Update orders say how a recreate replaces a running container.
const (
	// StopFirst stops the old container, then starts the new one. The service
	// is down for the old one's stop and the new one's start.
	StopFirst = "stop-first"
	// StartFirst starts the new container beside the old one, on the module's
	// networks under the same aliases. Only once the new one is healthy does
	// the old one leave the aliases. Then it drains, stops and goes.
	StartFirst = "start-first"
)

var updateOrders = []string{StopFirst, StartFirst}

// UpdateOrderOf returns the update order of container c of module m. It is
// c's own, else the module's, else stop-first.
func UpdateOrderOf(m *Module, c *Container) string {
	switch {
	case c.UpdateOrder != "":
		return c.UpdateOrder
	case m != nil && m.UpdateOrder != "":
		return m.UpdateOrder
	}
	return StopFirst
}

// MinDrain is the shortest drain of a start-first recreate. A connection
// begun as the old container left its aliases may have lost its first
// packet. The kernel sends it again after a second, and the old one must
// still answer then.
const MinDrain = 2 * time.Second

// DrainOf is how long a start-first recreate leaves the old container running
// once it has left the aliases. It is drain, else the stop grace period, and
// never less than MinDrain.
func (c *Container) DrainOf() time.Duration {
	d := c.StopGrace()
	if c.Drain > 0 {
		d = c.Drain.Std()
	}
	return max(d, MinDrain)
}

// StartFirstBlocker says why c cannot be replaced start-first, or "" when it
// can. Start-first runs old and new at once. So c must be reached through a
// module network. It must publish no host port, since two containers cannot
// bind it. It must write no volume, since one volume would have two writers.
// A read-only volume is shared safely.
func StartFirstBlocker(c *Container) string {
	switch {
	case len(c.Networks) == 0:
		return "it is reached through no module network: give it networks: (its clients reach it by name there), or use stop-first"
	case len(c.Ports) > 0:
		return "it publishes a host port, which the old and the new container cannot both bind: reach it through a module network instead, or use stop-first"
	}
	for _, vol := range c.Volumes {
		if !strings.HasSuffix(vol, ":ro") {
			return fmt.Sprintf("volume %q is writable, and the old and the new container would both write it: mount it :ro, or use stop-first", vol)
		}
	}
	return ""
}

// updateOrder checks the update order of container c of module m, at p.
func (v *validator) updateOrder(p []string, m *Module, c *Container) {
	at := func(field string) []string { return append(append([]string{}, p...), field) }
	v.oneOf(at("update-order"), c.UpdateOrder, updateOrders)
	if UpdateOrderOf(m, c) != StartFirst || v.undecoded(at("networks")...) {
		return
	}
	if why := StartFirstBlocker(c); why != "" {
		where := at("update-order")
		if c.UpdateOrder == "" {
			where = p // the module's default
		}
		v.fail(where, "cannot be replaced start-first: %s", why)
	}
}
