package apply

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// fakeEngine is an engine.Client in memory, for what the real engine cannot
// be made to do on demand (fail a create, a start, a pull) and to count and
// log requests exactly.
type fakeEngine struct {
	mu     sync.Mutex
	calls  int64
	nextID int
	ctrs   map[string]*fakeCtr // by ID
	images map[string]bool
	// log lists the requests that change the engine: "create NAME",
	// "start NAME", "stop NAME", "rename OLD NEW", "remove NAME", "pull REF".
	log []string
	// failCreate and failStart make Create and Start of that image fail;
	// pullable is what Pull can fetch.
	failCreate, failStart, pullable map[string]bool
	// imageIDs are the images' ids (default "id:REF"); pullIDs what a pull
	// makes them (a tag that moved upstream).
	imageIDs, pullIDs map[string]string
}

type fakeCtr struct {
	id, name string
	imageID  string
	spec     engine.Spec
	running  bool
	state    string
}

func newFakeEngine(images ...string) *fakeEngine {
	f := &fakeEngine{ctrs: map[string]*fakeCtr{}, images: map[string]bool{},
		failCreate: map[string]bool{}, failStart: map[string]bool{}, pullable: map[string]bool{},
		imageIDs: map[string]string{}, pullIDs: map[string]string{}}
	for _, im := range images {
		f.images[im] = true
	}
	return f
}

func (f *fakeEngine) begin() func() {
	f.mu.Lock()
	f.calls++
	return f.mu.Unlock
}

func (f *fakeEngine) find(idOrName string) (*fakeCtr, error) {
	if c, ok := f.ctrs[idOrName]; ok {
		return c, nil
	}
	for _, c := range f.ctrs {
		if c.name == idOrName {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no such container: %s: %w", idOrName, engine.ErrNotFound)
}

func (c *fakeCtr) view() engine.Container {
	return engine.Container{ID: c.id, Name: c.name, Image: c.spec.Image, ImageID: c.imageID, State: c.state, Running: c.running,
		Labels: maps.Clone(c.spec.Labels), RestartPolicy: c.spec.Restart}
}

func (f *fakeEngine) Ping(context.Context) error { defer f.begin()(); return nil }

func (f *fakeEngine) List(_ context.Context, labels map[string]string) ([]engine.Container, error) {
	defer f.begin()()
	var out []engine.Container
next:
	for _, c := range f.ctrs {
		for k, v := range labels {
			if have, ok := c.spec.Labels[k]; !ok || v != "" && have != v {
				continue next
			}
		}
		out = append(out, c.view())
	}
	slices.SortFunc(out, func(a, b engine.Container) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func (f *fakeEngine) Inspect(_ context.Context, idOrName string) (engine.Container, error) {
	defer f.begin()()
	c, err := f.find(idOrName)
	if err != nil {
		return engine.Container{}, err
	}
	return c.view(), nil
}

func (f *fakeEngine) ImagePresent(_ context.Context, ref string) (bool, error) {
	defer f.begin()()
	return f.images[ref], nil
}

func (f *fakeEngine) Pull(_ context.Context, ref string, _ io.Writer) error {
	defer f.begin()()
	f.log = append(f.log, "pull "+ref)
	if !f.pullable[ref] {
		return fmt.Errorf("pull %s: manifest unknown", ref)
	}
	f.images[ref] = true
	if id, ok := f.pullIDs[ref]; ok {
		f.imageIDs[ref] = id
	}
	return nil
}

func (f *fakeEngine) ImageID(_ context.Context, ref string) (string, error) {
	defer f.begin()()
	return f.imageID(ref)
}

func (f *fakeEngine) imageID(ref string) (string, error) {
	if !f.images[ref] {
		return "", fmt.Errorf("no such image %s: %w", ref, engine.ErrNotFound)
	}
	if id, ok := f.imageIDs[ref]; ok {
		return id, nil
	}
	return "id:" + ref, nil
}

func (f *fakeEngine) Create(_ context.Context, name string, spec engine.Spec) (string, error) {
	defer f.begin()()
	f.log = append(f.log, "create "+name)
	if _, err := f.find(name); err == nil {
		return "", fmt.Errorf("create %s: name already in use", name)
	}
	if !f.images[spec.Image] {
		return "", fmt.Errorf("create %s: no such image %s: %w", name, spec.Image, engine.ErrNotFound)
	}
	if f.failCreate[spec.Image] {
		return "", fmt.Errorf("create %s: refused", name)
	}
	f.nextID++
	id := fmt.Sprintf("id%03d", f.nextID)
	imageID, _ := f.imageID(spec.Image)
	f.ctrs[id] = &fakeCtr{id: id, name: name, spec: spec, state: "created", imageID: imageID}
	return id, nil
}

func (f *fakeEngine) Start(_ context.Context, id string) error {
	defer f.begin()()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	f.log = append(f.log, "start "+c.name)
	if f.failStart[c.spec.Image] {
		c.state = "created"
		return fmt.Errorf("start %s: exec: no such file", id)
	}
	c.running, c.state = true, "running"
	return nil
}

func (f *fakeEngine) Stop(_ context.Context, id string, _ time.Duration) error {
	defer f.begin()()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	f.log = append(f.log, "stop "+c.name)
	c.running, c.state = false, "exited"
	return nil
}

func (f *fakeEngine) Kill(ctx context.Context, id string) error { return f.Stop(ctx, id, 0) }

func (f *fakeEngine) Remove(_ context.Context, id string) error {
	defer f.begin()()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	f.log = append(f.log, "remove "+c.name)
	delete(f.ctrs, c.id)
	return nil
}

func (f *fakeEngine) Rename(_ context.Context, id, newName string) error {
	defer f.begin()()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	if other, err := f.find(newName); err == nil && other != c {
		return fmt.Errorf("rename %s: name %s already in use", id, newName)
	}
	f.log = append(f.log, "rename "+c.name+" "+newName)
	c.name = newName
	return nil
}

func (f *fakeEngine) SetRestart(_ context.Context, id, policy string) error {
	defer f.begin()()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	c.spec.Restart = policy
	return nil
}

func (f *fakeEngine) Logs(context.Context, string, io.Writer) error {
	defer f.begin()()
	return errors.New("fake engine: no logs")
}

func (f *fakeEngine) Wait(context.Context, string) (int, error) {
	defer f.begin()()
	return 0, errors.New("fake engine: no wait")
}

func (f *fakeEngine) Calls() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeEngine) Host() string { return "fake://" }
func (f *fakeEngine) Close() error { return nil }

// changes returns the log of changing requests since the last call.
func (f *fakeEngine) changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.log
	f.log = nil
	return l
}

// byName returns the container called name, or nil.
func (f *fakeEngine) byName(name string) *fakeCtr {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, _ := f.find(name)
	return c
}
