package apply

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/lifecycle"
	"github.com/meshctl/meshctl/pkg/mesh"
)

// pulls is what one apply pulled, and what the tags it pulled named then.
type pulls struct {
	eng  engine.Client
	opts Options
	// tried holds each image this apply pulled, or failed to.
	tried map[string]error
	// ids holds the id the tag of each `pull: always` image names now.
	ids    map[string]string
	always map[string]bool
}

// early gets ready what an apply can know it needs, before the plan and
// without the lock. That is the `pull: always` images of desired, and the
// images of f's steps.
func (p *pulls) early(ctx context.Context, desired []lifecycle.Desired, f *mesh.File) error {
	for i := range desired {
		if desired[i].Def.PullPolicy() == mesh.PullAlways {
			if err := p.pullAlways(ctx, desired[i].Image); err != nil {
				return err
			}
		}
	}
	if !p.opts.DryRun {
		p.stepImages(ctx, f)
	}
	return nil
}

// pull pulls ref once for this apply.
func (p *pulls) pull(ctx context.Context, ref string) {
	if _, done := p.tried[ref]; done {
		return
	}
	p.opts.Progress("pulling %s\n", ref)
	// A failure is not said here. The report says it once, on the line of
	// each container that needed the image.
	if err := p.eng.Pull(ctx, ref, p.opts.PullOutput); err != nil {
		p.tried[ref] = &reasonError{err: err, msg: engine.Reason(strings.TrimPrefix(err.Error(), "pull "+ref+": "))}
	} else {
		p.tried[ref] = nil
	}
}

// reasonError is an engine error as a report says it (engine.Reason).
type reasonError struct {
	err error
	msg string
}

func (e *reasonError) Error() string { return e.msg }

func (e *reasonError) Unwrap() error { return e.err }

// pullAlways pulls a `pull: always` image and notes the id its tag names
// now. A dry run pulls nothing and compares with what the engine has.
func (p *pulls) pullAlways(ctx context.Context, ref string) error {
	if _, done := p.ids[ref]; done {
		return nil
	}
	if !p.opts.DryRun {
		p.pull(ctx, ref)
	}
	id, err := p.eng.ImageID(ctx, ref)
	if err != nil && !engine.IsNotFound(err) {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if p.tried[ref] != nil && id != "" {
		// The registry is away but the image is here. Run what we have.
		p.opts.Progress("pull %s failed (%v); using the local image\n", ref, p.tried[ref])
		p.tried[ref] = nil
	}
	p.ids[ref] = id
	return ctx.Err()
}

// pullMissing pulls an image the plan found missing.
func (p *pulls) pullMissing(ctx context.Context, ref string) error {
	if p.always[ref] {
		return p.pullAlways(ctx, ref)
	}
	p.pull(ctx, ref)
	return ctx.Err()
}

// stepImages gets ready, without the lock, the image of each step that
// names its own (run.image). A window refuses to open without its step's
// image, so an apply says early when it cannot be had. A step's default
// image is a container's, which the plan gets ready already.
func (p *pulls) stepImages(ctx context.Context, f *mesh.File) {
	for _, mn := range f.ModuleNames() {
		m := f.Modules[mn]
		for _, sn := range slices.Sorted(maps.Keys(m.Steps)) {
			st := m.Steps[sn]
			if st.Run == nil || st.Run.Image == "" {
				continue
			}
			ref := st.Run.Image
			present, err := p.eng.ImagePresent(ctx, ref)
			if err == nil && !present {
				p.pull(ctx, ref)
				err = p.tried[ref]
			}
			if err != nil {
				p.opts.Warn("step %s/%s: image %s cannot be had (%v); the window will refuse to run until it can\n", mn, sn, ref, err)
			}
		}
	}
}

// needsImage reports whether carrying out it needs its image. A create and
// a recreate do. So does a change deferred until a window's close. The
// close must then not wait for a pull, or fail on "No such image".
func needsImage(it Item) bool {
	return it.Desired != nil && (it.Action == Create || it.Action == Recreate || it.Action == Deferred)
}

// missingImages returns the images that creates, recreates and deferred
// changes need and the engine lacks. Those to pull are not tried yet, and
// their pull policy allows it. Those absent were tried and failed, or are
// `pull: never`. Absent maps each to why.
func missingImages(ctx context.Context, eng engine.Client, items []Item, tried map[string]error) ([]string, map[string]string, error) {
	absent := map[string]string{}
	var missing []string
	seen := map[string]bool{}
	for _, it := range items {
		if !needsImage(it) || seen[it.Desired.Image] {
			continue
		}
		ref, policy := it.Desired.Image, it.Desired.Def.PullPolicy()
		seen[ref] = true
		if err, ok := tried[ref]; ok {
			if err != nil {
				absent[ref] = "pull failed: " + err.Error()
			}
			continue
		}
		if policy == mesh.PullAlways {
			missing = append(missing, ref)
			continue
		}
		present, err := eng.ImagePresent(ctx, ref)
		if err != nil {
			return nil, nil, fmt.Errorf("image %s: %w", ref, err)
		}
		switch refused := it.Desired.Def.PullRefused(); {
		case present:
		case refused != nil:
			absent[ref] = refused.Error()
		default:
			missing = append(missing, ref)
		}
	}
	sort.Strings(missing)
	return missing, absent, nil
}

// pinAlways gives each `pull: always` container of desired the id its tag
// named when this apply pulled it. A container running another id is
// recreated. It returns the images of those this apply has not pulled.
// Such an image is an artifact that moved while it pulled.
func (p *pulls) pinAlways(desired []lifecycle.Desired) []string {
	var newAlways []string
	for i := range desired {
		dc := &desired[i]
		if dc.Def.PullPolicy() != mesh.PullAlways {
			continue
		}
		id, ok := p.ids[dc.Image]
		if !ok {
			if p.always == nil {
				p.always = map[string]bool{}
			}
			p.always[dc.Image] = true
			newAlways = append(newAlways, dc.Image)
		}
		dc.PulledID = id
	}
	return newAlways
}
