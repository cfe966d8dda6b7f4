package enginetest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
)

// Fake is an engine.Client in memory, for what the test engine cannot be made
// to do on demand. It can fail a create, a start or a pull. It can take ten
// seconds to stop one container while the others answer at once. It counts
// and logs requests exactly. It is safe for concurrent use.
//
// A request whose context is done fails with the context's error, as the
// Docker client's does. An image is present (AddImages), pullable
// (SetPullable), or neither. A container's Start, Stop and Kill change only
// its state in memory. Wait and Logs return once it no longer runs.
type Fake struct {
	// Hook, when not nil, is called at the start of every request, before the
	// fake does anything. It gets the request's operation (see the Op
	// constants) and what the request names. For a request that names an
	// existing container, by ID or by name, that is the container's name.
	// Otherwise it is the argument as given, such as an image reference or a
	// new container's name. It is "" for ping and list.
	//
	// Hook runs without the fake's lock. So it may block while other requests
	// go on, to hold a Stop or a Pull where a test wants it. Set it before
	// the requests it must see, not while requests run.
	Hook func(op, target string)

	mu     sync.Mutex
	calls  int64
	nextID int
	ctrs   map[string]*fakeCtr        // by ID
	nets   map[string]*engine.Network // by ID
	// subnetSet holds the IDs of the networks created with a subnet.
	subnetSet map[string]bool
	images    map[string]bool
	// pullable is what Pull can fetch. failCreate and failStart make Create
	// and Start of that image fail.
	pullable, failCreate, failStart map[string]bool
	// imageIDs are the images' IDs (default "id:REF"). pullIDs are what a
	// pull makes them, as for a tag that moved upstream.
	imageIDs, pullIDs map[string]string
	// health is what a running container of an image reports (SetHealth).
	health map[string]health
	events []Event
	// seen is how many events Changes returned already.
	seen int
}

// The operations a Fake passes its Hook and records in its events.
const (
	OpPing         = "ping"
	OpList         = "list"
	OpInspect      = "inspect"
	OpImagePresent = "image-present"
	OpImageID      = "image-id"
	OpPull         = "pull"
	OpCreate       = "create"
	OpStart        = "start"
	OpStop         = "stop"
	OpKill         = "kill"
	OpRemove       = "remove"
	OpRename       = "rename"
	OpRestart      = "restart" // SetRestart
	OpLogs         = "logs"
	OpWait         = "wait"
	// The network requests.
	OpNetworks      = "networks"
	OpInspectNet    = "inspect-network"
	OpCreateNetwork = "create-network"
	OpRemoveNetwork = "remove-network"
	OpConnect       = "connect"
	OpDisconnect    = "disconnect"
)

// Event is one request that changed, or tried to change, the engine. It is a
// pull, create, start, stop, kill, remove, rename or restart (SetRestart).
type Event struct {
	// Seq numbers the events 1, 2, … in the order the fake carried them out.
	// At is when, after the Hook returned. So a Stop held by the Hook is
	// recorded when it ends, as a graceful stop ends.
	Seq int
	At  time.Time
	Op  string
	// Name is the container's name when the request was made. For a pull, it
	// is the image reference.
	Name string
	// Arg is a rename's new name, or a restart's policy.
	Arg string
	// Image is a create's image.
	Image string
	// Err is the error the request returned, "" when it succeeded.
	Err string
}

// String returns "OP NAME", or "OP NAME ARG" for a rename or restart.
func (e Event) String() string {
	if e.Arg != "" {
		return e.Op + " " + e.Name + " " + e.Arg
	}
	return e.Op + " " + e.Name
}

// Container is what a Fake holds of one container.
type Container struct {
	ID, Name string
	ImageID  string
	Spec     engine.Spec // Spec.Restart is the current restart policy
	Running  bool
	State    string
	ExitCode int
}

type fakeCtr struct {
	Container
	// stopped is closed while the container does not run.
	stopped chan struct{}
}

var _ engine.Client = (*Fake)(nil)

// NewFake returns a Fake holding images and no container.
func NewFake(images ...string) *Fake {
	f := &Fake{ctrs: map[string]*fakeCtr{}, nets: map[string]*engine.Network{}, subnetSet: map[string]bool{}, images: map[string]bool{},
		failCreate: map[string]bool{}, failStart: map[string]bool{}, pullable: map[string]bool{},
		imageIDs: map[string]string{}, pullIDs: map[string]string{}}
	for _, im := range images {
		f.images[im] = true
	}
	return f
}

// AddImages makes the fake hold refs.
func (f *Fake) AddImages(refs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ref := range refs {
		f.images[ref] = true
	}
}

// SetPullable says whether Pull can fetch ref.
func (f *Fake) SetPullable(ref string, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pullable[ref] = ok
}

// SetPullID makes a pull of ref give it the ID id, as when its tag moved
// upstream.
func (f *Fake) SetPullID(ref, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pullIDs[ref] = id
}

// FailCreate says whether Create fails for a container of image ref.
func (f *Fake) FailCreate(ref string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failCreate[ref] = fail
}

// FailStart says whether Start fails for a container of image ref. An
// entrypoint that does not exist fails so.
func (f *Fake) FailStart(ref string, fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failStart[ref] = fail
}

// Get returns a copy of the container called name.
func (f *Fake) Get(name string) (Container, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(name)
	if err != nil {
		return Container{}, false
	}
	out := c.Container
	out.Spec = cloneSpec(c.Spec)
	return out, true
}

// Containers returns a copy of every container, sorted by name.
func (f *Fake) Containers() []Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Container
	for _, c := range f.ctrs {
		cc := c.Container
		cc.Spec = cloneSpec(c.Spec)
		out = append(out, cc)
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// SetRunning makes the container called name run, or exit with code 0, by
// itself. It stands for a crash or a reboot, with no request and no event.
func (f *Fake) SetRunning(name string, running bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := f.find(name)
	if err != nil {
		panic("enginetest: SetRunning: " + err.Error())
	}
	if running {
		c.run()
	} else {
		c.exit(0)
	}
}

// ResetCalls sets the request count back to 0.
func (f *Fake) ResetCalls() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = 0
}

// Changes returns the events since the last call, as strings. Examples are
// "create m.a", "rename m.a m.a.meshctl-old" and "pull REF". They are the
// engine requests that changed something, or tried to.
func (f *Fake) Changes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, e := range f.events[f.seen:] {
		out = append(out, e.String())
	}
	f.seen = len(f.events)
	return out
}

// Events returns every event since the fake was made, in order.
func (f *Fake) Events() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.events)
}

// begin calls the hook, then takes the fake's lock and counts the request. It
// returns the unlock, or the context's error, with the lock not held.
func (f *Fake) begin(ctx context.Context, op, idOrName string) (func(), error) {
	f.mu.Lock()
	hook, target := f.Hook, idOrName
	if c, err := f.find(idOrName); err == nil && idOrName != "" {
		target = c.Name
	}
	f.mu.Unlock()
	if hook != nil {
		hook(op, target)
	}
	f.mu.Lock()
	f.calls++
	if err := ctx.Err(); err != nil {
		f.mu.Unlock()
		return nil, err
	}
	return f.mu.Unlock, nil
}

// record appends an event. The fake's lock is held.
func (f *Fake) record(e Event, err error) {
	e.Seq, e.At = len(f.events)+1, time.Now()
	if err != nil {
		e.Err = err.Error()
	}
	f.events = append(f.events, e)
}

func (f *Fake) find(idOrName string) (*fakeCtr, error) {
	if c, ok := f.ctrs[idOrName]; ok {
		return c, nil
	}
	for _, c := range f.ctrs {
		if c.Name == idOrName {
			return c, nil
		}
	}
	return nil, fmt.Errorf("no such container: %s: %w", idOrName, engine.ErrNotFound)
}

func (c *fakeCtr) view() engine.Container {
	return engine.Container{ID: c.ID, Name: c.Name, Image: c.Spec.Image, ImageID: c.ImageID, State: c.State, Running: c.Running,
		ExitCode: c.ExitCode, Labels: maps.Clone(c.Spec.Labels), RestartPolicy: c.Spec.Restart}
}

func (c *fakeCtr) run() {
	if !c.Running {
		c.Running, c.State, c.ExitCode = true, "running", 0
		c.stopped = make(chan struct{})
	}
}

func (c *fakeCtr) exit(code int) {
	if c.Running {
		c.Running, c.State, c.ExitCode = false, "exited", code
		close(c.stopped)
	}
}

func cloneSpec(s engine.Spec) engine.Spec {
	s.Entrypoint, s.Cmd, s.Env = slices.Clone(s.Entrypoint), slices.Clone(s.Cmd), slices.Clone(s.Env)
	s.Binds, s.VolumesFrom, s.Ports = slices.Clone(s.Binds), slices.Clone(s.VolumesFrom), slices.Clone(s.Ports)
	s.Labels, s.Files = maps.Clone(s.Labels), maps.Clone(s.Files)
	if s.Networks != nil {
		nets := make(map[string][]string, len(s.Networks))
		for k, v := range s.Networks {
			nets[k] = slices.Clone(v)
		}
		s.Networks = nets
	}
	return s
}

// Ping answers.
func (f *Fake) Ping(ctx context.Context) error {
	unlock, err := f.begin(ctx, OpPing, "")
	if err != nil {
		return err
	}
	defer unlock()
	return nil
}

// List returns the containers carrying all of labels, sorted by name.
func (f *Fake) List(ctx context.Context, labels map[string]string) ([]engine.Container, error) {
	unlock, err := f.begin(ctx, OpList, "")
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []engine.Container
next:
	for _, c := range f.ctrs {
		for k, v := range labels {
			if have, ok := c.Spec.Labels[k]; !ok || v != "" && have != v {
				continue next
			}
		}
		// As in the engine's listing, what only Inspect knows stays zero.
		v := c.view()
		v.ExitCode, v.RestartPolicy = 0, ""
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b engine.Container) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Inspect returns the container named or identified by idOrName.
func (f *Fake) Inspect(ctx context.Context, idOrName string) (engine.Container, error) {
	unlock, err := f.begin(ctx, OpInspect, idOrName)
	if err != nil {
		return engine.Container{}, err
	}
	defer unlock()
	c, err := f.find(idOrName)
	if err != nil {
		return engine.Container{}, err
	}
	v := c.view()
	f.addHealth(&v)
	return v, nil
}

// ImagePresent reports whether the fake holds ref.
func (f *Fake) ImagePresent(ctx context.Context, ref string) (bool, error) {
	unlock, err := f.begin(ctx, OpImagePresent, ref)
	if err != nil {
		return false, err
	}
	defer unlock()
	return f.images[ref], nil
}

// ImageID returns ref's ID. That is "id:REF" unless a pull set another.
func (f *Fake) ImageID(ctx context.Context, ref string) (string, error) {
	unlock, err := f.begin(ctx, OpImageID, ref)
	if err != nil {
		return "", err
	}
	defer unlock()
	return f.imageID(ref)
}

func (f *Fake) imageID(ref string) (string, error) {
	if !f.images[ref] {
		return "", fmt.Errorf("no such image %s: %w", ref, engine.ErrNotFound)
	}
	if id, ok := f.imageIDs[ref]; ok {
		return id, nil
	}
	return "id:" + ref, nil
}

// Pull fetches ref if it is pullable.
func (f *Fake) Pull(ctx context.Context, ref string, _ io.Writer) (err error) {
	unlock, err := f.begin(ctx, OpPull, ref)
	if err != nil {
		return err
	}
	defer unlock()
	defer func() { f.record(Event{Op: OpPull, Name: ref}, err) }()
	if !f.pullable[ref] {
		return fmt.Errorf("pull %s: manifest unknown", ref)
	}
	f.images[ref] = true
	if id, ok := f.pullIDs[ref]; ok {
		f.imageIDs[ref] = id
	}
	return nil
}

// Create creates, without starting it, a container called name.
func (f *Fake) Create(ctx context.Context, name string, spec engine.Spec) (id string, err error) {
	unlock, err := f.begin(ctx, OpCreate, name)
	if err != nil {
		return "", err
	}
	defer unlock()
	defer func() { f.record(Event{Op: OpCreate, Name: name, Image: spec.Image}, err) }()
	if _, err := f.find(name); err == nil {
		return "", fmt.Errorf("create %s: name already in use", name)
	}
	if !f.images[spec.Image] {
		return "", fmt.Errorf("create %s: no such image %s: %w", name, spec.Image, engine.ErrNotFound)
	}
	if f.failCreate[spec.Image] {
		return "", fmt.Errorf("create %s: refused", name)
	}
	for n := range spec.Networks {
		if _, err := f.findNet(n); err != nil {
			return "", fmt.Errorf("create %s: %w", name, err)
		}
	}
	f.nextID++
	id = fmt.Sprintf("id%03d", f.nextID)
	imageID, _ := f.imageID(spec.Image)
	f.ctrs[id] = &fakeCtr{Container: Container{ID: id, Name: name, Spec: cloneSpec(spec), State: "created", ImageID: imageID},
		stopped: closed()}
	return id, nil
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// Start starts a created or stopped container.
func (f *Fake) Start(ctx context.Context, id string) (err error) {
	unlock, err := f.begin(ctx, OpStart, id)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	defer func() { f.record(Event{Op: OpStart, Name: c.Name}, err) }()
	if f.failStart[c.Spec.Image] {
		return fmt.Errorf("start %s: exec: no such file", id)
	}
	for n := range c.Spec.Networks {
		if _, err := f.findNet(n); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
	}
	c.run()
	return nil
}

// Stop stops a running container at once, once the Hook has returned.
func (f *Fake) Stop(ctx context.Context, id string, _ time.Duration) error {
	unlock, err := f.begin(ctx, OpStop, id)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	f.record(Event{Op: OpStop, Name: c.Name}, nil)
	c.exit(0)
	return nil
}

// Kill kills a running container (exit 137). One that does not run is
// refused, as the engine does.
func (f *Fake) Kill(ctx context.Context, id string) (err error) {
	unlock, err := f.begin(ctx, OpKill, id)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	defer func() { f.record(Event{Op: OpKill, Name: c.Name}, err) }()
	if !c.Running {
		return fmt.Errorf("kill %s: container is not running", c.Name)
	}
	c.exit(137)
	return nil
}

// Remove removes the container, running or not.
func (f *Fake) Remove(ctx context.Context, id string) error {
	unlock, err := f.begin(ctx, OpRemove, id)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	f.record(Event{Op: OpRemove, Name: c.Name}, nil)
	c.exit(137)
	delete(f.ctrs, c.ID)
	return nil
}

// Rename gives the container a new name.
func (f *Fake) Rename(ctx context.Context, id, newName string) error {
	unlock, err := f.begin(ctx, OpRename, id)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	if other, err := f.find(newName); err == nil && other != c {
		return fmt.Errorf("rename %s: name %s already in use", id, newName)
	}
	f.record(Event{Op: OpRename, Name: c.Name, Arg: newName}, nil)
	c.Name = newName
	return nil
}

// SetRestart sets the container's restart policy.
func (f *Fake) SetRestart(ctx context.Context, id, policy string) error {
	unlock, err := f.begin(ctx, OpRestart, id)
	if err != nil {
		return err
	}
	defer unlock()
	c, err := f.find(id)
	if err != nil {
		return err
	}
	if policy == "" {
		policy = "no"
	}
	f.record(Event{Op: OpRestart, Name: c.Name, Arg: policy}, nil)
	c.Spec.Restart = policy
	return nil
}

// Logs writes nothing and returns once the container no longer runs.
func (f *Fake) Logs(ctx context.Context, id string, _ io.Writer) error {
	_, err := f.waitStopped(ctx, OpLogs, id)
	return err
}

// Wait returns the container's exit code once it no longer runs.
func (f *Fake) Wait(ctx context.Context, id string) (int, error) {
	return f.waitStopped(ctx, OpWait, id)
}

func (f *Fake) waitStopped(ctx context.Context, op, id string) (int, error) {
	unlock, err := f.begin(ctx, op, id)
	if err != nil {
		return -1, err
	}
	c, err := f.find(id)
	unlock()
	if err != nil {
		return -1, err
	}
	for {
		f.mu.Lock()
		running, stopped, code := c.Running, c.stopped, c.ExitCode
		f.mu.Unlock()
		if !running {
			return code, nil
		}
		select {
		case <-stopped:
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	}
}

// Calls returns the number of requests made.
func (f *Fake) Calls() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Host returns "fake://".
func (f *Fake) Host() string { return "fake://" }

// Close does nothing.
func (f *Fake) Close() error { return nil }
