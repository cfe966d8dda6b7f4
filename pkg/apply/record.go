package apply

import (
	"time"

	"github.com/meshctl/meshctl/pkg/holds"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// Files apply records in the state directory, under the state lock.
const (
	// AppliedFile is the desired state of the last apply: what a window's
	// close converges held containers to, and where `window run` without -f
	// finds its step.
	AppliedFile = "applied.json"
	// ReportFile is the last apply's report, for status.
	ReportFile = "last-apply.json"
)

// Applied is the applied.json document.
type Applied struct {
	state.Header
	AppliedAt time.Time  `json:"applied_at"`
	Source    string     `json:"source"`
	File      *mesh.File `json:"file"`
	// Images are the images apply resolved per engine name, with the build
	// each artifact: came from, so a window's close uses the same ones.
	Images map[string]Resolved `json:"images"`
}

// Resolved is a container's image as an apply resolved it.
type Resolved struct {
	Image string `json:"image"`
	Build string `json:"build,omitempty"`
}

// Desired returns the applied desired containers, as that apply resolved them.
func (a *Applied) Desired() ([]Desired, error) {
	if a.File == nil {
		return nil, nil
	}
	return Desire(a.File, func(module string) (string, string, bool, error) {
		return "", "", false, nil
	}, a.Images)
}

// LastReport is the last-apply.json document.
type LastReport struct {
	state.Header
	FinishedAt time.Time `json:"finished_at"`
	Source     string    `json:"source"`
	Result     string    `json:"result"` // ok or failed
	Error      string    `json:"error,omitempty"`
	Report     *Report   `json:"report"`
}

// Report is what an apply did (CONTRACT §5).
type Report struct {
	Changed     bool              `json:"changed"`
	DryRun      bool              `json:"dry_run"`
	EngineCalls int64             `json:"engine_calls"`
	Containers  []ContainerReport `json:"containers"`
	Windows     []holds.View      `json:"windows"`
	// Released are stale holds this apply released: windows that died
	// without closing.
	Released []holds.View `json:"released,omitempty"`
}

// ContainerReport is one container's line of the report.
type ContainerReport struct {
	Name      string   `json:"name"`
	Module    string   `json:"module"`
	Container string   `json:"container"`
	Action    string   `json:"action"`
	Reasons   []string `json:"reasons"`
	Window    string   `json:"window,omitempty"`
	// Build is the build id the container runs, for an artifact: container.
	Build string `json:"build,omitempty"`
	Error string `json:"error,omitempty"`
}

// LoadApplied reads the last applied desired state (a snapshot); ok is false
// when nothing was applied yet.
func LoadApplied(d *state.Dir) (*Applied, bool, error) {
	var a Applied
	ok, err := d.Read(AppliedFile, &a)
	return &a, ok, err
}

// CheckRecords reads, under the state lock, the two files an apply replaces
// (applied.json and last-apply.json), discarding what they hold. A file this
// meshctl cannot use (it does not parse, or a newer meshctl wrote it) is a
// *state.FileError naming it (exit 2): the apply must stop before it changes
// anything, and never overwrite it. Call it before carrying out the plan.
func CheckRecords(lock *state.Lock) error {
	if _, err := lock.Read(AppliedFile, &Applied{}); err != nil {
		return err
	}
	_, err := lock.Read(ReportFile, &LastReport{})
	return err
}
