package eventcheck

import (
	"fmt"
	"slices"
)

// labelSpec is meshctl's label of the canonical spec a container runs.
const labelSpec = "io.meshctl.spec"

// NormalDuringStep finds every time a container of module ran its normal
// spec on one host while a mesh window's step ran. That step may run on
// another host's engine: steps are its intervals there. normal lists the
// spec labels the module's containers carry outside a window. A held copy
// that runs its normal spec breaks the window as much as one never held. A
// changed hold's copy carries another spec, so it may run. events are the
// host's, with a start event at the zero time for each container that ran
// as the record began.
func NormalDuringStep(host string, events []Event, module string, normal []string, steps []Interval) []Violation {
	ivs := Intervals(normalEvents(events, module, normal))
	var out []Violation
	for _, s := range steps {
		for _, iv := range ivs {
			if iv.overlaps(s) {
				out = append(out, Violation{"normal-during-step",
					fmt.Sprintf("host %s: %s ran its normal spec while the mesh window's step %s ran", host, iv, s)})
			}
		}
	}
	return out
}

// normalEvents keeps the events of module's service containers whose spec
// label is one of normal.
func normalEvents(events []Event, module string, normal []string) []Event {
	var out []Event
	for _, e := range events {
		if e.Labels[labelModule] == module && e.Labels[labelRole] != roleStep && slices.Contains(normal, e.Labels[labelSpec]) {
			out = append(out, e)
		}
	}
	return out
}
