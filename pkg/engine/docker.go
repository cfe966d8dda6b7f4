package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/jsonmessage"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/docker/go-connections/nat"
	"github.com/docker/go-connections/sockets"
)

// DefaultHost is the engine address used when neither New's argument nor
// DOCKER_HOST names one.
const DefaultHost = client.DefaultDockerHost

// New returns a client of the engine at host. An empty host means
// DOCKER_HOST, else DefaultHost. A host is unix:///path or tcp://host:port,
// in plain HTTP. TLS is not supported.
//
// New makes no request. Ping negotiates the API version, or else the first
// request does.
func New(host string) (Client, error) {
	if host == "" {
		host = os.Getenv(client.EnvOverrideHost)
	}
	if host == "" {
		host = DefaultHost
	}
	u, err := client.ParseHostURL(host)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	base := &http.Transport{}
	if err := sockets.ConfigureTransport(base, u.Scheme, u.Host); err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	tr := &countingTransport{next: base}
	api, err := client.NewClientWithOpts(
		// WithHost sets the address and base path. WithHTTPClient, after it,
		// swaps in our transport, which dials that same address.
		client.WithHost(host),
		client.WithHTTPClient(&http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}),
		client.WithAPIVersionNegotiation(),
	)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", host, err)
	}
	return &dockerClient{api: api, host: host, tr: tr, base: base,
		http: &http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}, url: u}, nil
}

// countingTransport counts round trips and keeps the network error behind a
// failed one. The Docker client replaces that error with a message that drops
// the cause. So the transport keeps it for the caller.
type countingTransport struct {
	next  http.RoundTripper
	calls atomic.Int64
}

type netErrKey struct{}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.calls.Add(1)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		if slot, ok := req.Context().Value(netErrKey{}).(*atomic.Pointer[error]); ok {
			slot.CompareAndSwap(nil, &err)
		}
	}
	return resp, err
}

type dockerClient struct {
	api  *client.Client
	host string
	tr   *countingTransport
	base *http.Transport
	// http and url send the requests meshctl makes without the Docker client
	// (List). They go through the same counting transport.
	http *http.Client
	url  *url.URL
}

// callTimeout bounds a request that a well engine answers at once. That is
// every request but a pull, a followed log, a wait for an exit and a stop. A
// stop gets callTimeout on top of its grace period. A dockerd with a stuck
// container can leave a request unanswered for ever, such as an inspect of it
// or a list. A command waiting on it would keep the state lock, and so block
// every other command of the host.
var callTimeout = 2 * time.Minute

// do runs f through call, bounded by callTimeout.
func (c *dockerClient) do(ctx context.Context, op string, f func(ctx context.Context) error) error {
	return c.call(ctx, op, callTimeout, f)
}

// call runs f within bound, or unbounded when bound is 0. It gives f's error
// the context op. Or it turns the error into an *UnreachableError, a
// not-found error or a *NoAnswerError. f must send its requests with the ctx
// it is given. Through that ctx the transport hands back the network error.
func (c *dockerClient) call(ctx context.Context, op string, bound time.Duration, f func(ctx context.Context) error) error {
	fctx := ctx
	if bound > 0 {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, bound)
		defer cancel()
	}
	var netErr atomic.Pointer[error]
	err := f(context.WithValue(fctx, netErrKey{}, &netErr))
	if err == nil {
		return nil
	}
	if bound > 0 && ctx.Err() == nil && errors.Is(fctx.Err(), context.DeadlineExceeded) {
		return &NoAnswerError{Op: op, Bound: bound}
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", op, err)
	}
	var cause error
	if p := netErr.Load(); p != nil {
		cause = *p
	}
	var opErr *net.OpError
	if (errors.As(cause, &opErr) && opErr.Op == "dial") || client.IsErrConnectionFailed(err) {
		if cause == nil {
			cause = err
		}
		return &UnreachableError{Host: c.host, Err: cause}
	}
	if cerrdefs.IsNotFound(err) {
		err = notFoundError{err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func (c *dockerClient) Ping(ctx context.Context) error {
	return c.do(ctx, "ping", func(ctx context.Context) error {
		p, err := c.api.Ping(ctx)
		if err != nil {
			return err
		}
		// Negotiate from this answer, so that the next request does not ping again.
		c.api.NegotiateAPIVersionPing(p)
		return nil
	})
}

// summaryName picks the container's own name among a list entry's names. The
// list also holds "/other/alias" names of legacy links.
func summaryName(names []string) string {
	for _, n := range names {
		if n = strings.TrimPrefix(n, "/"); !strings.Contains(n, "/") {
			return n
		}
	}
	return ""
}

func (c *dockerClient) Inspect(ctx context.Context, idOrName string) (Container, error) {
	var r container.InspectResponse
	err := c.do(ctx, "inspect "+idOrName, func(ctx context.Context) (err error) {
		r, err = c.api.ContainerInspect(ctx, idOrName)
		return err
	})
	if err != nil {
		return Container{}, err
	}
	ct := Container{ID: r.ID, Name: strings.TrimPrefix(r.Name, "/"), ImageID: r.Image}
	if r.Config != nil {
		ct.Image = r.Config.Image
		ct.Labels = r.Config.Labels
	}
	if r.State != nil {
		ct.State = string(r.State.Status)
		ct.Running = r.State.Running
		ct.ExitCode = r.State.ExitCode
		ct.StartedAt = parseTime(r.State.StartedAt)
		ct.FinishedAt = parseTime(r.State.FinishedAt)
	}
	if r.HostConfig != nil {
		ct.RestartPolicy = string(r.HostConfig.RestartPolicy.Name)
	}
	inspectHealth(&ct, r)
	if r.NetworkSettings != nil {
		for name, ep := range r.NetworkSettings.Networks {
			if ep != nil && ep.IPAddress != "" {
				if ct.Addresses == nil {
					ct.Addresses = map[string]string{}
				}
				ct.Addresses[name] = ep.IPAddress
			}
		}
	}
	return ct, nil
}

// parseTime parses the engine's RFC 3339 times. The engine writes
// "0001-01-01T00:00:00Z" for never, which parses to the zero time.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

func (c *dockerClient) ImagePresent(ctx context.Context, ref string) (bool, error) {
	err := c.do(ctx, "inspect image "+ref, func(ctx context.Context) error {
		_, err := c.api.ImageInspect(ctx, ref)
		return err
	})
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func (c *dockerClient) ImageID(ctx context.Context, ref string) (string, error) {
	var id string
	err := c.do(ctx, "inspect image "+ref, func(ctx context.Context) error {
		r, err := c.api.ImageInspect(ctx, ref)
		id = r.ID
		return err
	})
	return id, err
}

func (c *dockerClient) Pull(ctx context.Context, ref string, progress io.Writer) error {
	if progress == nil {
		progress = io.Discard
	}
	return c.call(ctx, "pull "+ref, 0, func(ctx context.Context) error {
		rc, err := c.api.ImagePull(ctx, ref, image.PullOptions{})
		if err != nil {
			return err
		}
		defer rc.Close()
		// The engine answers 200 before pulling; a failure comes as the
		// stream's last message, which this returns. A writer that is a
		// terminal gets the layers' progress bars, updated in place.
		fd, tty := uintptr(0), false
		if t, ok := progress.(interface{ Terminal() (uintptr, bool) }); ok {
			fd, tty = t.Terminal()
		}
		return jsonmessage.DisplayJSONMessagesStream(rc, progress, fd, tty, nil)
	})
}

func (c *dockerClient) Create(ctx context.Context, name string, spec Spec) (string, error) {
	exposed, bindings, err := nat.ParsePortSpecs(spec.Ports)
	if err != nil {
		return "", fmt.Errorf("create %s: ports: %w", name, err)
	}
	cfg := &container.Config{
		Image:        spec.Image,
		Entrypoint:   spec.Entrypoint,
		Cmd:          spec.Cmd,
		Env:          spec.Env,
		Labels:       spec.Labels,
		ExposedPorts: exposed,
		StopTimeout:  spec.StopTimeout,
	}
	host := &container.HostConfig{
		Binds:         spec.Binds,
		VolumesFrom:   spec.VolumesFrom,
		NetworkMode:   container.NetworkMode(spec.NetworkMode),
		PortBindings:  bindings,
		RestartPolicy: restartPolicy(spec.Restart),
	}
	containerFields(cfg, host, spec)
	first, netCfg, rest := networking(spec)
	if first != "" {
		host.NetworkMode = container.NetworkMode(first)
	}
	var id string
	err = c.do(ctx, "create "+name, func(ctx context.Context) error {
		r, err := c.api.ContainerCreate(ctx, cfg, host, netCfg, nil, name)
		id = r.ID
		return err
	})
	if err == nil && len(rest) > 0 {
		if err = c.connect(ctx, name, id, spec, rest); err != nil {
			// Removed, so as not to be left half-joined. The caller knows no
			// id.
			_ = c.Remove(context.WithoutCancel(ctx), id)
			return "", hideIn(err, spec.Env)
		}
	}
	return id, hideIn(err, spec.Env)
}

func restartPolicy(name string) container.RestartPolicy {
	if name == "" {
		name = "no"
	}
	return container.RestartPolicy{Name: container.RestartPolicyMode(name)}
}

func (c *dockerClient) Start(ctx context.Context, id string) error {
	err := c.do(ctx, "start "+id, func(ctx context.Context) error {
		return c.api.ContainerStart(ctx, id, container.StartOptions{})
	})
	if err == nil || IsNotFound(err) || ctx.Err() != nil || errors.As(err, new(*UnreachableError)) || errors.As(err, new(*NoAnswerError)) {
		return err
	}
	// runc's refusal can quote the container's environment.
	if env, _, ok := c.envOf(ctx, id); ok {
		return hideIn(err, env)
	}
	return &hiddenError{text: "start " + id + ": the engine refused it (its words withheld: the container's environment, which they may quote, could not be read)", err: err}
}

func (c *dockerClient) Stop(ctx context.Context, id string, timeout time.Duration) error {
	secs := int((timeout + time.Second - 1) / time.Second)
	if timeout < 0 {
		secs = -1 // the engine waits for the container to exit, however long
	}
	bound := time.Duration(0) // a stop that waits however long is not bounded either
	if secs >= 0 {
		bound = time.Duration(secs)*time.Second + callTimeout
	}
	return c.call(ctx, "stop "+id, bound, func(ctx context.Context) error {
		return c.api.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs})
	})
}

func (c *dockerClient) Kill(ctx context.Context, id string) error {
	return c.do(ctx, "kill "+id, func(ctx context.Context) error {
		return c.api.ContainerKill(ctx, id, "KILL")
	})
}

func (c *dockerClient) Remove(ctx context.Context, id string) error {
	return c.do(ctx, "remove "+id, func(ctx context.Context) error {
		// RemoveVolumes stays false, since a volume outlives its container.
		return c.api.ContainerRemove(ctx, id, container.RemoveOptions{Force: true})
	})
}

func (c *dockerClient) Rename(ctx context.Context, id, newName string) error {
	return c.do(ctx, "rename "+id+" to "+newName, func(ctx context.Context) error {
		return c.api.ContainerRename(ctx, id, newName)
	})
}

func (c *dockerClient) SetRestart(ctx context.Context, id string, policy string) error {
	return c.do(ctx, "set restart policy of "+id, func(ctx context.Context) error {
		_, err := c.api.ContainerUpdate(ctx, id, container.UpdateConfig{RestartPolicy: restartPolicy(policy)})
		return err
	})
}

func (c *dockerClient) Logs(ctx context.Context, id string, w io.Writer) error {
	return c.call(ctx, "logs of "+id, 0, func(ctx context.Context) error {
		rc, err := c.api.ContainerLogs(ctx, id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Follow: true})
		if err != nil {
			return err
		}
		defer rc.Close()
		_, err = stdcopy.StdCopy(w, w, rc)
		return err
	})
}

func (c *dockerClient) Wait(ctx context.Context, id string) (int, error) {
	var code int
	err := c.call(ctx, "wait for "+id, 0, func(ctx context.Context) error {
		res, errs := c.api.ContainerWait(ctx, id, container.WaitConditionNotRunning)
		select {
		case r := <-res:
			if r.Error != nil && r.Error.Message != "" {
				return errors.New(r.Error.Message)
			}
			code = int(r.StatusCode)
			return nil
		case err := <-errs:
			return err
		}
	})
	return code, err
}

func (c *dockerClient) Calls() int64 { return c.tr.calls.Load() }

func (c *dockerClient) Host() string { return c.host }

func (c *dockerClient) Close() error {
	// The Docker client closes only a transport it made itself.
	c.base.CloseIdleConnections()
	return c.api.Close()
}
