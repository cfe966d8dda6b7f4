package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// Client is the narrow interface meshctl needs from a container engine.
//
// Every method returns an *UnreachableError when the engine cannot be
// reached, and an error matching ErrNotFound (errors.Is) when the container,
// image or network it names does not exist.
type Client interface {
	// Ping checks that the engine answers and negotiates the API version
	// from its answer, in exactly one request.
	Ping(ctx context.Context) error
	// List returns every container, running or not, that carries all of
	// labels, sorted by name. A label is key=value, or just the key where the
	// value is "". It costs one request and needs no API version negotiated.
	List(ctx context.Context, labels map[string]string) ([]Container, error)
	// Inspect returns the container named or identified by idOrName.
	Inspect(ctx context.Context, idOrName string) (Container, error)
	// ImagePresent reports whether the engine holds the image ref.
	ImagePresent(ctx context.Context, ref string) (bool, error)
	// ImageID returns the id ("sha256:…") of the image ref in the engine,
	// or an error matching ErrNotFound when the engine lacks it.
	ImageID(ctx context.Context, ref string) (string, error)
	// Pull pulls ref, writing the engine's progress lines to progress (nil
	// discards them), and returns the error the engine reports in the stream.
	Pull(ctx context.Context, ref string, progress io.Writer) error
	// Create creates, without starting it, a container called name.
	Create(ctx context.Context, name string, spec Spec) (id string, err error)
	// Start starts a created or stopped container. A running one is left as
	// it is.
	Start(ctx context.Context, id string) error
	// Stop sends SIGTERM, or the image's stop signal. It kills the container
	// if it still runs after timeout, rounded up to seconds. A negative
	// timeout waits for ever. A stopped container is left as it is. The
	// request lasts until the container has stopped, so ctx must allow it.
	Stop(ctx context.Context, id string, timeout time.Duration) error
	// Kill sends SIGKILL. The engine refuses it for a container that does not
	// run.
	Kill(ctx context.Context, id string) error
	// Remove removes the container, running or not. Volumes stay.
	Remove(ctx context.Context, id string) error
	// Rename gives the container a new name.
	Rename(ctx context.Context, id, newName string) error
	// SetRestart sets the restart policy to "no", "always", "unless-stopped"
	// or "on-failure". An empty policy means "no".
	SetRestart(ctx context.Context, id string, policy string) error
	// Logs follows the container's stdout and stderr, both written to w,
	// until the container exits. The container must not have a TTY.
	Logs(ctx context.Context, id string, w io.Writer) error
	// Tail returns the last lines of the container's stdout and stderr,
	// interleaved, without following.
	Tail(ctx context.Context, id string, lines int) (string, error)
	// Wait waits until the container is not running and returns its exit
	// code. A container that was created but not started yet is not running.
	// So start it first.
	Wait(ctx context.Context, id string) (exitCode int, err error)
	// Networks returns every network that carries all of labels, as List
	// does. They are sorted by name, without their containers.
	Networks(ctx context.Context, labels map[string]string) ([]Network, error)
	// InspectNetwork returns the network named or identified by
	// idOrName, with the containers attached to it.
	InspectNetwork(ctx context.Context, idOrName string) (Network, error)
	// CreateNetwork creates a bridge network called name.
	CreateNetwork(ctx context.Context, name string, spec NetworkSpec) (id string, err error)
	// RemoveNetwork removes a network. The engine refuses while a running
	// container is attached.
	RemoveNetwork(ctx context.Context, idOrName string) error
	// ConnectNetwork joins a container to a network, where it answers to
	// aliases too.
	ConnectNetwork(ctx context.Context, network, container string, aliases []string) error
	// DisconnectNetwork takes a container, running or not, off a network. One
	// that is not on it is a not-found error, and so is a network that is
	// gone.
	DisconnectNetwork(ctx context.Context, network, container string) error
	// ConnectNetworkAt joins a container to a network at address, without
	// aliases. An engine gives an address asked for only on a network with
	// a configured subnet. Elsewhere it refuses (IsAddressRefused).
	ConnectNetworkAt(ctx context.Context, network, container, address string) error
	// Calls returns the number of HTTP requests this client has made.
	Calls() int64
	// Host returns the engine address in use, such as
	// unix:///var/run/docker.sock.
	Host() string
	// Close releases the client's idle connections.
	Close() error
}

// Container is what meshctl knows of one container.
type Container struct {
	ID   string
	Name string // without the leading "/"
	// Image is the reference the container was created from. ImageID is the
	// image it resolved to.
	Image   string
	ImageID string
	// State is created, running, paused, restarting, exited, removing or
	// dead. Running is true while the engine counts the container as
	// running, which includes paused and restarting, as in docker inspect.
	State   string
	Running bool
	// ExitCode, RestartPolicy and FinishedAt are known from Inspect only.
	// List leaves them zero. It knows StartedAt only for a container that
	// has run less than Settle since a restart.
	ExitCode      int
	Labels        map[string]string
	RestartPolicy string
	StartedAt     time.Time
	FinishedAt    time.Time
	// Health is the healthcheck's verdict: starting, healthy or unhealthy;
	// "" for a container without one. HealthOutput is the last probe's
	// output. Healthcheck (the probe in effect, the image's included) is
	// known from Inspect only. List knows Restarting and RestartCount only
	// for a container that has run less than Settle since a restart.
	Health       string
	HealthOutput string
	Restarting   bool
	RestartCount int
	Healthcheck  *Healthcheck
	// Addresses are the container's IPv4 addresses by network name. They
	// are known from Inspect only.
	Addresses map[string]string
}

// Spec is what Create needs to create a container.
type Spec struct {
	Image string
	// Entrypoint and Cmd override the image's when not nil. A non-nil empty
	// Entrypoint clears the image's entrypoint.
	Entrypoint, Cmd []string
	Env             []string // "K=V"
	Binds           []string // docker -v style: "vol:/path[:ro]", "/host:/path:ro"
	// Files are host files bound read-only, each under its path in the
	// container: secrets and configs. Unlike a bind of Binds, one missing
	// at the create or the start fails it. The engine never makes it an
	// empty directory, on the host and in the container.
	Files       map[string]string
	VolumesFrom []string
	// NetworkMode is "host", "none", "bridge" or a network name. An empty one
	// leaves the engine's default.
	NetworkMode string
	Ports       []string // docker -p style: "127.0.0.1:5000:5000[/tcp]"
	Restart     string   // "" means "no"
	Labels      map[string]string
	StopTimeout *int // seconds; nil leaves the engine's default
	// StopSignal is sent by every stop. An empty one leaves the image's,
	// SIGTERM by default.
	StopSignal string
	// Healthcheck is the probe. nil leaves the image's, and Test ["NONE"]
	// disables it.
	Healthcheck *Healthcheck
	User        string
	WorkingDir  string
	Hostname    string
	Init        bool
	ReadOnly    bool
	Tmpfs       map[string]string // path → mount options
	CapAdd      []string
	CapDrop     []string
	Memory      int64 // bytes; 0 is no limit
	NanoCPUs    int64
	PidsLimit   int64 // 0 is the engine's default, -1 no limit
	LogDriver   string
	LogOptions  map[string]string
	ExtraHosts  []string // "host:ip"
	// Expose are ports offered to the container's network without publishing
	// them, such as "80/tcp".
	Expose     []string
	Sysctls    map[string]string
	Ulimits    []Ulimit
	Privileged bool
	StdinOpen  bool
	Tty        bool
	DNS        []string
	// Networks are the networks the container joins, by name. Each has the
	// aliases it answers to there. NetworkMode stays "".
	Networks map[string][]string
}

// Ulimit is a resource limit of the container's processes. -1 is unlimited.
type Ulimit struct {
	Name       string
	Soft, Hard int64
}

// Network is what meshctl knows of one network.
type Network struct {
	ID, Name string
	Labels   map[string]string
	Internal bool
	// Subnets are the network's address ranges ("198.18.0.0/24"), as the
	// engine's address pool gave them.
	Subnets []string
	// Containers are the names of the containers attached, known from
	// InspectNetwork only.
	Containers []string
}

// NetworkSpec is what CreateNetwork needs.
type NetworkSpec struct {
	Internal bool
	Labels   map[string]string
	// Subnet, when set, is the network's configured IPv4 range
	// ("198.18.3.0/24"). Only on such a network does the engine give a
	// container the address asked for (ConnectNetworkAt).
	Subnet string
}

// Healthcheck is a container's probe, as the engine runs it. Every Interval,
// Test must succeed within Timeout. Retries failures in a row after
// StartPeriod make the container unhealthy. Zero durations and retries are
// the engine's defaults (30s, 30s, 3).
type Healthcheck struct {
	Test                           []string
	Interval, Timeout, StartPeriod time.Duration
	Retries                        int
}

// ErrNotFound is matched (errors.Is) by the errors about a container or an
// image that does not exist.
var ErrNotFound = errors.New("not found")

// IsNotFound reports whether err says that a container or image does not
// exist.
func IsNotFound(err error) bool {
	return errors.Is(err, ErrNotFound)
}

// IsAddressRefused reports whether err is an engine's refusal of an address
// asked for on a network without a configured subnet.
func IsAddressRefused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "user configured subnets")
}

// UnreachableError is returned when the engine cannot be reached. The cause
// is no such socket, a refused connection, or one that timed out.
type UnreachableError struct {
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the Docker engine at %s: %v", e.Host, e.Err)
}

// Unwrap returns the network error behind e.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Fault says an unreachable engine is a failure.
func (e *UnreachableError) Fault() fault.Kind { return fault.Failed }

// NoAnswerError is a request the engine did not answer within its bound. A
// well engine answers such a request at once (see callTimeout). The engine
// may have acted on it all the same.
type NoAnswerError struct {
	Op    string
	Bound time.Duration
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("%s: the engine did not answer within %s", e.Op, e.Bound)
}

// Fault says the command failed (exit 1).
func (e *NoAnswerError) Fault() fault.Kind { return fault.Failed }

// notFoundError keeps the engine's own message ("No such container: x")
// while matching ErrNotFound.
type notFoundError struct{ error }

func (e notFoundError) Is(target error) bool { return target == ErrNotFound }

func (e notFoundError) Unwrap() error { return e.error }
