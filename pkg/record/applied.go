package record

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
	"github.com/meshctl/meshctl/pkg/state"
)

// Files apply records in the state directory, under the state lock.
const (
	// AppliedFile is the desired state of the last apply. A window's close
	// converges held containers to it, and `window run` without -f finds its
	// step there.
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
	// Images are the images apply resolved per engine name. Each `artifact:`
	// carries the build it came from. So a window's close uses the same ones.
	Images map[string]Resolved `json:"images"`
	// Modules says, per module, which apply last wrote it. A file owns its
	// modules, and an apply leaves the others as they were.
	Modules map[string]ModuleRecord `json:"modules,omitempty"`
}

// ModuleRecord is when and from where a module was last applied.
type ModuleRecord struct {
	AppliedAt time.Time `json:"applied_at"`
	Source    string    `json:"source"`
}

// Merge returns the applied state after an apply of f that removed the
// modules in remove. It keeps a's modules that f does not name as they were,
// with their containers, images and record. f's modules replace theirs, and
// the removed ones are gone. desired are f's containers as this apply
// resolved them. sources says which source each of f's modules records.
func (a *Applied) Merge(f *mesh.File, remove []string, desired []lifecycle.Desired, source string, now time.Time, sources Sources) *Applied {
	out := &Applied{AppliedAt: now, Source: source, File: &mesh.File{Modules: map[string]*mesh.Module{}},
		Images: map[string]Resolved{}, Modules: map[string]ModuleRecord{}}
	replaced := map[string]bool{}
	for _, m := range remove {
		replaced[m] = true
	}
	for m := range f.Modules {
		replaced[m] = true
	}
	if a.File != nil {
		for name, m := range a.File.Modules {
			if !replaced[name] {
				out.File.Modules[name] = m
				out.Modules[name] = a.record(name)
			}
		}
		for name, r := range a.Images {
			if module, _, ok := strings.Cut(name, "."); ok && !replaced[module] {
				out.Images[name] = r
			}
		}
	}
	for name, m := range f.Modules {
		out.File.Modules[name] = m
		rec := ModuleRecord{AppliedAt: now, Source: source}
		if old, ok := a.Modules[name]; ok && sources == KeepSources {
			rec.Source = old.Source
		}
		out.Modules[name] = rec
	}
	for _, d := range desired {
		out.Images[d.Name] = Resolved{Image: d.Image, Build: d.Build, PulledID: d.PulledID}
	}
	return out
}

// KeepTimes makes a keep the times of prev where nothing changed. a is the
// applied state an apply is about to record (Merge). prev is the one it
// replaces. applied_at is the last change, not the last check. A module whose
// definition, images and source are prev's keeps prev's record. When no
// module changed and none came or went, a keeps prev's time and source.
// KeepTimes then reports false, and prev need not be written again. So apply
// --last of an unchanged state is no change.
func (a *Applied) KeepTimes(prev *Applied) (changed bool) {
	// A file an older meshctl wrote, or none, is written anew.
	changed = prev.Version != state.Version || prev.File == nil ||
		len(a.Modules) != len(prev.Modules) || !maps.Equal(a.Images, prev.Images)
	for name, rec := range a.Modules {
		old, ok := prev.Modules[name]
		if !ok || old.Source != rec.Source || prev.File == nil || a.File == nil ||
			!sameModule(a.File.Modules[name], prev.File.Modules[name]) || !sameImages(a.Images, prev.Images, name) {
			changed = true
			continue
		}
		a.Modules[name] = old
	}
	if !changed {
		a.AppliedAt, a.Source = prev.AppliedAt, prev.Source
	}
	return changed
}

// sameImages reports whether module m's containers resolve to the same
// images in a as in b.
func sameImages(a, b map[string]Resolved, m string) bool {
	prefix := m + "."
	n := 0
	for name, r := range a {
		if strings.HasPrefix(name, prefix) {
			if b[name] != r {
				return false
			}
			n++
		}
	}
	for name := range b {
		if strings.HasPrefix(name, prefix) {
			n--
		}
	}
	return n == 0
}

// sameModule reports whether modules a and b encode alike. The same module,
// as a file the decode cache gave shares with prev, needs no encoding.
func sameModule(a, b *mesh.Module) bool {
	return a == b && a != nil || sameJSON(a, b)
}

// sameJSON reports whether a and b encode alike, as the state file holds
// them. It is false when either cannot be encoded.
func sameJSON(a, b any) bool {
	ja, err := json.Marshal(a)
	if err != nil {
		return false
	}
	jb, err := json.Marshal(b)
	return err == nil && bytes.Equal(ja, jb)
}

// Sources says which source a module an apply writes records (Merge).
type Sources int

const (
	// ThisSource records the apply's own source (apply -f FILE).
	ThisSource Sources = iota
	// KeepSources keeps the source the module was applied from before, where
	// there is one. apply --last uses it, since it re-applies the applied
	// state.
	KeepSources
)

// record returns the record of module m. An applied.json written before
// modules had their own has only the whole file's, and record falls back to
// it.
func (a *Applied) record(m string) ModuleRecord {
	if r, ok := a.Modules[m]; ok {
		return r
	}
	return ModuleRecord{AppliedAt: a.AppliedAt, Source: a.Source}
}

// ModuleNames returns the applied modules, in order. It returns none when
// nothing was applied.
func (a *Applied) ModuleNames() []string {
	if a.File == nil {
		return nil
	}
	return a.File.ModuleNames()
}

// HasStep reports whether the applied state has a module's step. With nothing
// applied, or an applied state without its file, every step counts. Then none
// can be told gone.
func (a *Applied) HasStep(module, step string) bool {
	if a == nil || a.File == nil {
		return true
	}
	m := a.File.Modules[module]
	return m != nil && m.Steps[step] != nil
}

// Resolved is a container's image as an apply resolved it.
type Resolved struct {
	Image string `json:"image"`
	Build string `json:"build,omitempty"`
	// PulledID is the image id a tag named when the apply pulled it. It is
	// set for `pull: always` containers. A window's close recreates a held
	// container that runs another image (a deferred "image (newer pull)").
	PulledID string `json:"pulled_id,omitempty"`
}

// Desired returns the applied desired containers, as that apply resolved
// them. key is the host's secret key (SecretKey).
func (a *Applied) Desired(key []byte) ([]lifecycle.Desired, error) {
	if a.File == nil {
		return nil, nil
	}
	return Desire(a.File, func(module string) (string, string, bool, error) {
		return "", "", false, nil
	}, a.Images, key)
}

// DesiredFor is the one way to read what the applied record wants.
// It returns every module's desired containers, hashed with d's secret key.
// A module whose files cannot be read is left out, and errs says why.
// Only module's own failure fails the call; "" names no module.
func (a *Applied) DesiredFor(d *state.Dir, module string) (desired []lifecycle.Desired, errs map[string]error, err error) {
	key, err := PeekSecretKey(d, a.File)
	if err != nil {
		return nil, nil, err
	}
	desired, errs = a.DesiredEach(key)
	if err := errs[module]; err != nil {
		return nil, errs, err
	}
	return desired, errs, nil
}

// DesiredEach is Desired module by module. A module whose containers cannot
// be resolved is left out, and errs says why, by module. An env-file that
// cannot be read while a secret is rotated is such a case. The other modules'
// containers are returned. A command's work on one module never depends on
// another module's files. So a window on store closes whatever web's env-file
// says.
func (a *Applied) DesiredEach(key []byte) (desired []lifecycle.Desired, errs map[string]error) {
	if a.File == nil {
		return nil, nil
	}
	for _, m := range a.File.ModuleNames() {
		one := &mesh.File{Modules: map[string]*mesh.Module{m: a.File.Modules[m]}}
		d, err := (&Applied{File: one, Images: a.Images}).Desired(key)
		if err != nil {
			if errs == nil {
				errs = map[string]error{}
			}
			errs[m] = err
			continue
		}
		desired = append(desired, d...)
	}
	return desired, errs
}

// Result is how an apply ended, as last-apply.json says.
type Result string

// The results of an apply.
const (
	ResultOK     Result = "ok"
	ResultFailed Result = "failed"
)

// LastReport is the last-apply.json document.
type LastReport struct {
	state.Header
	FinishedAt time.Time `json:"finished_at"`
	Source     string    `json:"source"`
	Result     Result    `json:"result"` // ok or failed
	Error      string    `json:"error,omitempty"`
	Report     *Report   `json:"report"`
}

// Report is what an apply did (CONTRACT §5).
type Report struct {
	Changed     bool              `json:"changed"`
	DryRun      bool              `json:"dry_run"`
	EngineCalls int64             `json:"engine_calls"`
	Containers  []ContainerReport `json:"containers"`
	Windows     []coord.View      `json:"windows"`
	// Released are stale holds this apply released, of windows that died
	// without closing.
	Released []coord.View `json:"released,omitempty"`
	// Networks are the module networks the apply planned. It is empty when no
	// module has any.
	Networks []NetworkReport `json:"networks,omitempty"`
}

// Action is what an apply did to a container or a network, as its report
// says. Package apply names the actions (apply.Create and the others).
type Action string

// NetworkReport is one network's line of the report. The action is create,
// unchanged, remove, orphan, kept or failed. A kept network is in use, so it
// was not removed.
type NetworkReport struct {
	Name    string   `json:"name"`
	Module  string   `json:"module"`
	Action  Action   `json:"action"`
	Reasons []string `json:"reasons"`
}

// ContainerReport is one container's line of the report.
type ContainerReport struct {
	Name      string   `json:"name"`
	Module    string   `json:"module"`
	Container string   `json:"container"`
	Action    Action   `json:"action"`
	Reasons   []string `json:"reasons"`
	Window    string   `json:"window,omitempty"`
	// Build is the build id the container runs, for an `artifact:` container.
	Build string `json:"build,omitempty"`
	Error string `json:"error,omitempty"`
	// Health is what a container this apply created or recreated reached.
	// That is healthy, running, unhealthy, exited or restarting. Log holds
	// the last lines of the log of one that failed.
	Health string   `json:"health,omitempty"`
	Log    []string `json:"log,omitempty"`
}

// LoadApplied reads the last applied desired state, as a snapshot. ok is
// false when nothing was applied yet.
func LoadApplied(d *state.Dir) (*Applied, bool, error) {
	var a Applied
	ok, err := d.Read(AppliedFile, &a)
	return &a, ok, err
}

// CheckReport reads last-apply.json under the state lock, discarding what it
// holds. A file this meshctl cannot use is a *state.FileError naming it (exit
// 2). It may not parse, or a newer meshctl wrote it. The apply must then stop
// before it changes anything, and never overwrite the file. An apply calls
// CheckReport before carrying out its plan. It has read applied.json, its
// previous state, under the same lock.
//
// Only its version is decoded (state.VersionOnly). A report of a thousand
// containers decoded in full was a sixth of a no-op apply's work
// (docs/performance.md).
func CheckReport(lock *state.Lock) error {
	_, err := lock.Read(ReportFile, &state.VersionOnly{})
	return err
}
