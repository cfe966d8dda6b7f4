package engine_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/internal/enginetest"
	"github.com/meshctl/meshctl/pkg/engine"
)

// prefix names everything these tests create, so that a leftover is easy to
// tell apart and a run never touches another run's containers.
var prefix = "meshctl-enginetest-" + randHex(4) + "-"

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// create creates a test container and removes it when the test ends.
func create(t *testing.T, c engine.Client, name string, spec engine.Spec) string {
	t.Helper()
	id, err := c.Create(ctxT(t), name, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Remove(context.Background(), id); err != nil && !engine.IsNotFound(err) {
			t.Errorf("cleanup: %v", err)
		}
	})
	return id
}

// calls checks that f costs exactly want requests.
func calls(t *testing.T, c engine.Client, want int64, what string, f func() error) {
	t.Helper()
	before := c.Calls()
	if err := f(); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got := c.Calls() - before; got != want {
		t.Errorf("%s made %d requests, want %d", what, got, want)
	}
}

func TestPingThenListCostsTwoRequests(t *testing.T) {
	c := enginetest.Client(t)
	ctx := ctxT(t)
	if n := c.Calls(); n != 0 {
		t.Fatalf("a new client has made %d requests", n)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.List(ctx, map[string]string{"meshctl.test.run": prefix}); err != nil {
		t.Fatal(err)
	}
	if n := c.Calls(); n != 2 {
		t.Errorf("ping + list made %d requests, want 2", n)
	}
}

func TestListWithoutPingNegotiates(t *testing.T) {
	c := enginetest.Client(t)
	ctx := ctxT(t)
	// Without negotiation the client speaks the newest API version, which an
	// older engine refuses; this must succeed whatever the engine's version.
	// The filter matches nothing: a container of another test that started
	// again within engine.Settle would cost an inspect (engine.StateOf).
	none := map[string]string{"meshctl.test.none": prefix}
	if _, err := c.List(ctx, none); err != nil {
		t.Fatal(err)
	}
	if n := c.Calls(); n != 1 {
		t.Errorf("first list made %d requests, want 1 (it speaks the engine's own version: no negotiation)", n)
	}
	calls(t, c, 1, "second list", func() error { _, err := c.List(ctx, none); return err })
}

func TestListFiltersByLabelsIncludingStopped(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	run := prefix + "list"
	spec := func(labels map[string]string) engine.Spec {
		return engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "300"}, NetworkMode: "none", Labels: labels}
	}
	running := create(t, c, run+"-running", spec(map[string]string{"run": run, "role": "a"}))
	create(t, c, run+"-created", spec(map[string]string{"run": run, "role": "a"}))
	exited := create(t, c, run+"-exited", spec(map[string]string{"run": run, "role": "a"}))
	create(t, c, run+"-other", spec(map[string]string{"run": run, "role": "b"}))
	create(t, c, run+"-unlabelled", spec(nil))
	for _, id := range []string{running, exited} {
		if err := c.Start(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Kill(ctx, exited); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Wait(ctx, exited); err != nil {
		t.Fatal(err)
	}

	names := func(labels map[string]string) string {
		t.Helper()
		var list []engine.Container
		calls(t, c, 1, "list", func() (err error) { list, err = c.List(ctx, labels); return err })
		var out []string
		for _, ct := range list {
			out = append(out, strings.TrimPrefix(ct.Name, run+"-")+"="+ct.State)
		}
		return strings.Join(out, " ")
	}
	if got, want := names(map[string]string{"run": run, "role": "a"}), "created=created exited=exited running=running"; got != want {
		t.Errorf("run=%s,role=a: got %q, want %q", run, got, want)
	}
	if got, want := names(map[string]string{"run": run, "role": ""}), "created=created exited=exited other=created running=running"; got != want {
		t.Errorf("run=%s,role: got %q, want %q", run, got, want)
	}

	list, err := c.List(ctx, map[string]string{"run": run, "role": "b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 {
		t.Fatalf("role=b: got %d containers, want 1", len(list))
	}
	got := list[0]
	if got.Name != run+"-other" || got.Image != enginetest.Image || !strings.HasPrefix(got.ImageID, "sha256:") ||
		got.Running || got.Labels["role"] != "b" || len(got.ID) != 64 {
		t.Errorf("role=b: got %+v", got)
	}
}

func TestContainerLifecycle(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	name := prefix + "life"
	volume := prefix + "vol"
	t.Cleanup(func() { rawDelete(t, c.Host(), "/volumes/"+volume) })
	timeout := 1
	spec := engine.Spec{
		Image:       enginetest.Image,
		Cmd:         []string{"sh", "-c", "echo kept >/data/f; exec sleep 300"},
		Env:         []string{"A=1", "B=two words"},
		Binds:       []string{volume + ":/data", "/etc/hostname:/host-hostname:ro"},
		NetworkMode: "none",
		Ports:       []string{"127.0.0.1:15000:5000", "15001:5001/udp"},
		Restart:     "unless-stopped",
		Labels:      map[string]string{"meshctl.test": "life"},
		StopTimeout: &timeout,
	}
	var id string
	calls(t, c, 1, "create", func() (err error) { id, err = c.Create(ctx, name, spec); return err })
	t.Cleanup(func() { c.Remove(context.Background(), id) })

	ct := inspect(t, c, name)
	if ct.ID != id || ct.Name != name || ct.Image != enginetest.Image || ct.State != "created" || ct.Running ||
		ct.RestartPolicy != "unless-stopped" || ct.Labels["meshctl.test"] != "life" || !ct.StartedAt.IsZero() {
		t.Errorf("after create: %+v", ct)
	}
	if _, err := c.Create(ctx, name, spec); err == nil || engine.IsNotFound(err) || !strings.Contains(err.Error(), "create "+name) {
		t.Errorf("create over an existing name: got %v, want a conflict naming it", err)
	}

	// A window's open stops every held container whatever it read, a
	// created one too: the engine answers 304, which is no error.
	if err := c.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("stop a created container: %v, want nil", err)
	}
	if ct := inspect(t, c, id); ct.State != "created" {
		t.Errorf("after a stop of a created container: state %s, want created", ct.State)
	}

	calls(t, c, 1, "start", func() error { return c.Start(ctx, id) })
	if ct := inspect(t, c, id); ct.State != "running" || !ct.Running || ct.StartedAt.IsZero() {
		t.Errorf("after start: %+v", ct)
	}

	if err := c.Start(ctx, id); err != nil {
		t.Errorf("start a running container: %v, want nil", err)
	}

	calls(t, c, 1, "set restart", func() error { return c.SetRestart(ctx, id, "no") })
	if ct := inspect(t, c, id); ct.RestartPolicy != "no" {
		t.Errorf("restart policy after SetRestart(no): %q", ct.RestartPolicy)
	}
	if err := c.SetRestart(ctx, id, "on-failure"); err != nil {
		t.Fatal(err)
	}
	if ct := inspect(t, c, id); ct.RestartPolicy != "on-failure" {
		t.Errorf("restart policy after SetRestart(on-failure): %q", ct.RestartPolicy)
	}

	// sleep is PID 1 and ignores SIGTERM: Stop must kill it once the timeout passes.
	start := time.Now()
	calls(t, c, 1, "stop", func() error { return c.Stop(ctx, id, time.Second) })
	if d := time.Since(start); d < time.Second || d > 20*time.Second {
		t.Errorf("stop with a 1s timeout took %v", d)
	}
	if err := c.Stop(ctx, id, time.Second); err != nil {
		t.Errorf("stop a stopped container: %v, want nil", err)
	}
	if err := c.Kill(ctx, id); err == nil || engine.IsNotFound(err) {
		t.Errorf("kill a stopped container: %v, want the engine's refusal", err)
	}
	ct = inspect(t, c, id)
	if ct.State != "exited" || ct.Running || ct.ExitCode != 137 || ct.FinishedAt.Before(ct.StartedAt) {
		t.Errorf("after stop: %+v", ct)
	}

	calls(t, c, 1, "rename", func() error { return c.Rename(ctx, id, name+"-old") })
	if _, err := c.Inspect(ctx, name); !engine.IsNotFound(err) {
		t.Errorf("inspect the old name after rename: got %v, want not found", err)
	}
	if ct := inspect(t, c, name+"-old"); ct.ID != id {
		t.Errorf("the new name is %s, want %s", ct.ID, id)
	}

	// The window's step container borrows the held container's volumes.
	if out, code := runToExit(t, c, name+"-from", engine.Spec{
		Image: enginetest.Image, Cmd: []string{"cat", "/data/f", "/host-hostname"}, NetworkMode: "none", VolumesFrom: []string{id},
	}); code != 0 || !strings.HasPrefix(out, "kept\n") {
		t.Errorf("volumes-from reader: exit %d, output %q", code, out)
	}

	calls(t, c, 1, "remove", func() error { return c.Remove(ctx, id) })
	if _, err := c.Inspect(ctx, id); !engine.IsNotFound(err) {
		t.Errorf("inspect after remove: got %v, want not found", err)
	}
	if err := c.Remove(ctx, id); !engine.IsNotFound(err) {
		t.Errorf("remove again: got %v, want not found", err)
	}

	// The named volume outlived its container: a new one reads the file.
	if out, code := runToExit(t, c, name+"-reader", engine.Spec{
		Image: enginetest.Image, Cmd: []string{"cat", "/data/f"}, NetworkMode: "none", Binds: []string{volume + ":/data:ro"},
	}); code != 0 || out != "kept\n" {
		t.Errorf("after its container was removed, the volume reads %q (exit %d), want %q", out, code, "kept\n")
	}
}

// runToExit creates and starts a container, and returns its output and exit
// code once it has exited.
func runToExit(t *testing.T, c engine.Client, name string, spec engine.Spec) (string, int) {
	t.Helper()
	ctx := ctxT(t)
	id := create(t, c, name, spec)
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	code, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := c.Logs(ctx, id, &out); err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

func inspect(t *testing.T, c engine.Client, idOrName string) engine.Container {
	t.Helper()
	var ct engine.Container
	calls(t, c, 1, "inspect", func() (err error) { ct, err = c.Inspect(ctxT(t), idOrName); return err })
	return ct
}

func TestLogsAndWait(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	id := create(t, c, prefix+"logs", engine.Spec{
		Image:       enginetest.Image,
		Entrypoint:  []string{"/bin/sh", "-c"},
		Cmd:         []string{"echo out; sleep 1; echo err >&2; exit 3"},
		NetworkMode: "none",
	})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Logs follows: it returns once the container has exited, a second later.
	var out bytes.Buffer
	if err := c.Logs(ctx, id, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out\nerr\n" {
		t.Errorf("logs: got %q, want %q", out.String(), "out\nerr\n")
	}
	code, err := c.Wait(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 {
		t.Errorf("exit code: got %d, want 3", code)
	}
	if ct := inspect(t, c, id); ct.ExitCode != 3 || ct.State != "exited" || ct.RestartPolicy != "no" {
		t.Errorf("after exit: %+v", ct)
	}
}

func TestWaitReturnsWhenKilled(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	id := create(t, c, prefix+"wait", engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "300"}, NetworkMode: "none"})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		code, err := c.Wait(ctx, id)
		if err != nil {
			t.Error(err)
		}
		done <- code
	}()
	select {
	case <-done:
		t.Fatal("wait returned while the container runs")
	case <-time.After(500 * time.Millisecond):
	}
	if err := c.Kill(ctx, id); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != 137 {
		t.Errorf("exit code after kill: got %d, want 137", code)
	}
}

func TestNotFound(t *testing.T) {
	c := enginetest.Client(t)
	ctx := ctxT(t)
	missing := prefix + "missing"
	if _, err := c.Inspect(ctx, missing); !errors.Is(err, engine.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Errorf("inspect: got %v, want not found naming %s", err, missing)
	}
	for name, err := range map[string]error{
		"start":       c.Start(ctx, missing),
		"stop":        c.Stop(ctx, missing, time.Second),
		"remove":      c.Remove(ctx, missing),
		"set restart": c.SetRestart(ctx, missing, "no"),
	} {
		if !engine.IsNotFound(err) {
			t.Errorf("%s: got %v, want not found", name, err)
		}
	}
	if ok, err := c.ImagePresent(ctx, "meshtest/absent:0"); ok || err != nil {
		t.Errorf("image present: got %v, %v; want false, nil", ok, err)
	}
	if ok, err := c.ImagePresent(ctx, enginetest.Image); !ok || err != nil {
		t.Errorf("image present %s: got %v, %v; want true, nil", enginetest.Image, ok, err)
	}
	if id, err := c.ImageID(ctx, enginetest.Image); err != nil || !strings.HasPrefix(id, "sha256:") {
		t.Errorf("image id %s: got %q, %v; want sha256:…", enginetest.Image, id, err)
	}
	if _, err := c.ImageID(ctx, "meshtest/absent:0"); !engine.IsNotFound(err) {
		t.Errorf("image id of a missing image: got %v, want not found", err)
	}
	// Create never pulls: a missing image is an error the caller can tell apart.
	if _, err := c.Create(ctx, missing, engine.Spec{Image: "meshtest/absent:0"}); !engine.IsNotFound(err) {
		t.Errorf("create from a missing image: got %v, want not found", err)
	}
	if _, err := c.Create(ctx, missing, engine.Spec{Image: enginetest.Image, Ports: []string{"nope:x"}}); err == nil {
		t.Error("create with a bad port spec succeeded")
	}
}

func TestPull(t *testing.T) {
	c := enginetest.Client(t)
	ctx := ctxT(t)
	reg := newRegistry(t, false)
	ref := reg + "/meshtest/pulled:" + randHex(4)
	t.Cleanup(func() { rawDelete(t, c.Host(), "/images/"+ref) })

	if ok, err := c.ImagePresent(ctx, ref); ok || err != nil {
		t.Fatalf("before pull: present %v, %v", ok, err)
	}
	var progress bytes.Buffer
	if err := c.Pull(ctx, ref, &progress); err != nil {
		t.Fatalf("pull: %v\n%s", err, progress.String())
	}
	if !strings.Contains(progress.String(), "Downloaded newer image") {
		t.Errorf("progress lacks the final status:\n%s", progress.String())
	}
	if ok, err := c.ImagePresent(ctx, ref); !ok || err != nil {
		t.Errorf("after pull: present %v, %v", ok, err)
	}

	// The engine has answered 200 by the time a layer fails: the error comes
	// in the stream.
	broken := newRegistry(t, true) + "/meshtest/broken:" + randHex(4)
	err := c.Pull(ctx, broken, nil)
	if err == nil || !strings.Contains(err.Error(), "pull "+broken) {
		t.Errorf("pull with a broken layer: got %v, want an error naming %s", err, broken)
	}
	t.Log(err)
	if ok, _ := c.ImagePresent(ctx, broken); ok {
		t.Error("a failed pull left the image present")
	}
}

// newRegistry starts a minimal image registry on loopback that serves, under
// any name and tag, one image of one new layer; a broken registry answers 404
// for that layer. It returns the registry's host:port.
func newRegistry(t *testing.T, broken bool) (host string) {
	content := []byte(randHex(16)) // a layer no earlier run left in the engine
	var diff bytes.Buffer
	tw := tar.NewWriter(&diff)
	tw.WriteHeader(&tar.Header{Name: "pulled.txt", Mode: 0o644, Size: int64(len(content)), ModTime: time.Unix(0, 0)})
	tw.Write(content)
	tw.Close()
	var layer bytes.Buffer
	gz := gzip.NewWriter(&layer)
	gz.Write(diff.Bytes())
	gz.Close()
	digest := func(b []byte) string { return fmt.Sprintf("sha256:%x", sha256.Sum256(b)) }

	config, _ := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH, "os": "linux", "config": map[string]any{},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(diff.Bytes())}},
	})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config":        map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json", "size": len(config), "digest": digest(config)},
		"layers":        []any{map[string]any{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": layer.Len(), "digest": digest(layer.Bytes())}},
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		p := req.URL.Path
		var body []byte
		switch {
		case p == "/v2/":
			body = []byte("{}")
		case strings.Contains(p, "/manifests/"):
			w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
			w.Header().Set("Docker-Content-Digest", digest(manifest))
			body = manifest
		case strings.HasSuffix(p, "/blobs/"+digest(config)):
			body = config
		case strings.HasSuffix(p, "/blobs/"+digest(layer.Bytes())) && !broken:
			body = layer.Bytes()
		default:
			http.Error(w, `{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown"}]}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		if req.Method != http.MethodHead {
			w.Write(body)
		}
	}))
	t.Cleanup(srv.Close)
	// The engine treats 127.0.0.0/8 registries as insecure: plain HTTP is fine.
	return strings.TrimPrefix(srv.URL, "http://")
}

// rawDelete removes what the engine API has no method for (a volume, an
// image), to leave the test engine as it was.
func rawDelete(t *testing.T, host, path string) {
	hc := &http.Client{Timeout: 30 * time.Second}
	base := "http://" + strings.TrimPrefix(host, "tcp://")
	if sock, ok := strings.CutPrefix(host, "unix://"); ok {
		hc.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}
		base = "http://engine"
	}
	req, _ := http.NewRequest(http.MethodDelete, base+"/v1.41"+path, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Logf("cleanup %s: %v", path, err)
		return
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		t.Logf("cleanup %s: %s", path, resp.Status)
	}
}

func TestUnreachable(t *testing.T) {
	dir := t.TempDir()

	// A socket file nobody listens on: connection refused.
	refused := filepath.Join(dir, "refused.sock")
	l, err := net.Listen("unix", refused)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	// A TCP port nobody listens on.
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := tl.Addr().String()
	tl.Close()

	for _, host := range []string{
		"unix://" + filepath.Join(dir, "missing", "docker.sock"),
		"unix://" + refused,
		"tcp://" + closedPort,
	} {
		t.Run(host, func(t *testing.T) {
			c, err := engine.New(host)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Host() != host {
				t.Errorf("Host() = %q, want %q", c.Host(), host)
			}
			ctx := ctxT(t)
			check := func(what string, err error) {
				t.Helper()
				var ue *engine.UnreachableError
				if !errors.As(err, &ue) {
					t.Fatalf("%s: got %v (%T), want *UnreachableError", what, err, err)
				}
				want := "cannot reach the Docker engine at " + host + ": "
				if !strings.HasPrefix(err.Error(), want) || ue.Fault() != fault.Failed || ue.Host != host {
					t.Errorf("%s: got %q, want it to start with %q", what, err, want)
				}
				// The cause names the network error, not the client's generic message.
				if strings.Contains(err.Error(), "Is the docker daemon running") {
					t.Errorf("%s: %q lacks the network error", what, err)
				}
			}
			check("ping", c.Ping(ctx))
			if n := c.Calls(); n != 1 {
				t.Errorf("ping made %d requests, want 1", n)
			}
			_, err = c.List(ctx, nil)
			check("list", err)
			_, err = c.Inspect(ctx, "x")
			check("inspect", err)
			_, err = c.Create(ctx, "x", engine.Spec{Image: "x"})
			check("create", err)
			check("stop", c.Stop(ctx, "x", time.Second))
			_, err = c.Wait(ctx, "x")
			check("wait", err)
			check("logs", c.Logs(ctx, "x", &bytes.Buffer{}))
			check("pull", c.Pull(ctx, "x", nil))
			_, err = c.ImagePresent(ctx, "x")
			check("image present", err)
		})
	}
}

func TestCanceledIsNotUnreachable(t *testing.T) {
	c := enginetest.Client(t)
	enginetest.RequireImage(t, c, enginetest.Image)
	ctx := ctxT(t)
	id := create(t, c, prefix+"cancel", engine.Spec{Image: enginetest.Image, Cmd: []string{"sleep", "300"}, NetworkMode: "none"})
	if err := c.Start(ctx, id); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err := c.Wait(wctx, id)
	var ue *engine.UnreachableError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ue) {
		t.Errorf("wait past its deadline: got %v, want a deadline error, not unreachable", err)
	}
}

func TestNewDefaultsToDockerHost(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///run/elsewhere.sock")
	c, err := engine.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Host() != "unix:///run/elsewhere.sock" || c.Calls() != 0 {
		t.Errorf("New(\"\") with DOCKER_HOST set: host %q after %d requests", c.Host(), c.Calls())
	}
	t.Setenv("DOCKER_HOST", "")
	c, err = engine.New("") // makes no request: the default engine is never touched
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Host() != engine.DefaultHost {
		t.Errorf("New(\"\") without DOCKER_HOST: host %q, want %q", c.Host(), engine.DefaultHost)
	}
	if _, err := engine.New("/var/run/docker.sock"); err == nil {
		t.Error("New accepted a host without a scheme")
	}
}
