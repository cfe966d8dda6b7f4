package harness

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/state"
)

// signalGrace is how soon after SIGTERM or SIGINT a command must have
// exited, wherever it was.
const signalGrace = 2 * time.Second

// signalMesh is a module whose step holds nothing: its window's close has
// no container to bring back, so the whole interrupted path fits in
// signalGrace.
const signalMesh = `modules:
  sigm:
    containers:
      app:
        image: meshtest/busybox:1
        command: [sleep, "3600"]
        network: none
    steps:
      nap:
        exec: [/bin/sleep, "60"]
`

// TestSignalEndsCommand: SIGTERM and SIGINT end a command
// within two seconds wherever it is — reading its mesh file from a stdin
// that never ends, decoding a large one, waiting for a lock, waiting on an
// engine call that never answers, running a step — with exit 130, and
// nothing half-written in the state directory.
func TestSignalEndsCommand(t *testing.T) {
	// An engine that accepts and never answers: every call to it hangs
	// until meshctl gives up on it.
	sock := filepath.Join(shortTempDir(t), "hang.sock")
	accepted := hangingEngine(t, sock, false)
	hang := "unix://" + sock
	// One that answers pings only, for the decoding cases: an apply sends
	// its ping as it starts, while it still decodes (engine.PingAhead), so
	// there the first request that hangs is the first after the decode.
	psock := filepath.Join(shortTempDir(t), "ping.sock")
	decoded := hangingEngine(t, psock, true)
	pinged := "unix://" + psock

	tests := []signalCase{
		{name: "apply reading its file from a stdin that never ends",
			args: []string{"apply", "-f", "-"}, sig: syscall.SIGTERM, stdin: true},
		{name: "window run reading its file from a stdin that never ends",
			args: []string{"window", "run", "sigm", "nap", "-f", "-"}, sig: syscall.SIGINT, stdin: true},
		{name: "apply decoding a large mesh file",
			args: []string{"--docker-host", pinged, "apply", "-f", "big.yaml"}, sig: syscall.SIGTERM, after: 200 * time.Millisecond, decoding: true,
			prep: func(t *testing.T, m *meshctl) { writeBigMesh(t, filepath.Join(m.Dir, "big.yaml")) }},
		{name: "window run decoding a large mesh file",
			args: []string{"--docker-host", pinged, "window", "run", "big", "nap", "-f", "big.yaml"}, sig: syscall.SIGINT, after: 200 * time.Millisecond, decoding: true,
			prep: func(t *testing.T, m *meshctl) { writeBigMesh(t, filepath.Join(m.Dir, "big.yaml")) }},
		// The decoder refuses a -f that is no regular file without opening
		// it (exit 2); were it opened, the signal must still end it.
		{name: "apply from a FIFO no one writes",
			args: []string{"apply", "-f", "fifo.yaml"}, sig: syscall.SIGTERM, refusable: true,
			prep: func(t *testing.T, m *meshctl) {
				if err := syscall.Mkfifo(filepath.Join(m.Dir, "fifo.yaml"), 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "apply reading an env-file that is a FIFO no one writes",
			args: []string{"apply", "-f", "fifoenv.yaml"}, sig: syscall.SIGTERM, engine: true, refusable: true,
			prep: func(t *testing.T, m *meshctl) {
				if err := syscall.Mkfifo(filepath.Join(m.Dir, "secret.env"), 0o600); err != nil {
					t.Fatal(err)
				}
				mesh := strings.Replace(signalMesh, "network: none", "network: none\n        env-file: [secret.env]", 1)
				if err := os.WriteFile(filepath.Join(m.Dir, "fifoenv.yaml"), []byte(mesh), 0o600); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "build request waiting for the ledger lock",
			args: []string{"--lock-timeout", "1m", "build", "request", "web"}, sig: syscall.SIGTERM,
			prep: holdLock("ledger")},
		{name: "build record waiting for the ledger lock",
			args: []string{"--lock-timeout", "1m", "build", "record", "b-01M8R0TS7B000DBZQPR6TEMNFQ", "--failed"}, sig: syscall.SIGINT,
			prep: holdLock("ledger")},
		{name: "build import reading a stdin that never ends",
			args: []string{"build", "import"}, sig: syscall.SIGTERM, stdin: true},
		{name: "status on an engine that never answers",
			args: []string{"--docker-host", hang, "status"}, sig: syscall.SIGTERM},
		{name: "apply on an engine that never answers",
			args: []string{"--docker-host", hang, "apply", "-f", "mesh.yaml"}, sig: syscall.SIGTERM},
		{name: "apply --dry-run on an engine that never answers",
			args: []string{"--docker-host", hang, "apply", "--dry-run", "-f", "mesh.yaml"}, sig: syscall.SIGINT},
		{name: "window run on an engine that never answers",
			args: []string{"--docker-host", hang, "window", "run", "sigm", "nap", "-f", "mesh.yaml"}, sig: syscall.SIGTERM},
		{name: "window run during its step",
			args: []string{"window", "run", "sigm", "nap", "-f", "mesh.yaml"}, sig: syscall.SIGTERM, engine: true,
			ready: func(stderr string) bool { return strings.Contains(stderr, "step nap started") }},
		{name: "window run during its step, SIGINT",
			args: []string{"window", "run", "sigm", "nap", "-f", "mesh.yaml"}, sig: syscall.SIGINT, engine: true,
			ready: func(stderr string) bool { return strings.Contains(stderr, "step nap started") }},
		{name: "apply waiting for the state lock",
			args: []string{"--lock-timeout", "1m", "apply", "-f", "mesh.yaml"}, sig: syscall.SIGTERM, engine: true,
			prep:  holdLock("state"),
			ready: func(stderr string) bool { return strings.Contains(stderr, "waiting for") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A decode can end before its signal on a fast machine. Then
			// the case is tried again with the signal sent sooner.
			for try := 0; ; try++ {
				counter := accepted
				if tt.decoding {
					counter = decoded
				}
				if !signalOnce(t, tt, hang, counter) {
					return
				}
				if try == 3 {
					t.Fatalf("the decode ended before the signal %d times, the last after %s", try+1, tt.after)
				}
				tt.after /= 2
				t.Logf("the decode ended before the signal; trying again %s after the start", tt.after)
			}
		})
	}
}

// signalCase is one case of TestSignalEndsCommand.
type signalCase struct {
	name   string
	args   []string
	sig    syscall.Signal
	prep   func(t *testing.T, m *meshctl) // before the command starts
	stdin  bool                           // stdin is a pipe the test never closes
	engine bool                           // needs the test engine
	ready  func(stderr string) bool       // the command is where the test wants it
	after  time.Duration                  // else: send the signal this long after the start
	// refusable: the command may instead refuse its input at once, exit
	// 2, before the signal (an env-file that is no regular file).
	refusable bool
	// decoding: the signal must land before the command's first call to
	// the engine that never answers, while it still decodes its file.
	decoding bool
}

// signalOnce runs one case once. It says whether a decoding case ended,
// or reached the engine, before its signal. That tells nothing, so the
// caller tries it again.
func signalOnce(t *testing.T, tt signalCase, hang string, accepted *atomic.Int64) (early bool) {
	t.Helper()
	host := hang
	if tt.engine {
		host = meshrun.TestEngine(t)
	}
	m := newMeshctl(t, host)
	if err := os.WriteFile(filepath.Join(m.Dir, "mesh.yaml"), []byte(signalMesh), 0o600); err != nil {
		t.Fatal(err)
	}
	if tt.prep != nil {
		tt.prep(t, m)
	}
	var stderr meshrun.Output
	cmd := m.Command(tt.args...)
	cmd.Stderr = &stderr
	if tt.stdin {
		pr, pw, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer pw.Close()
		cmd.Stdin = pr
		defer pr.Close()
	}
	before := accepted.Load()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Where the command is: told by its stderr, by the hanging
	// engine's accepts, or else given time to get stuck.
	deadline := time.Now().Add(20 * time.Second)
	for {
		switch {
		case tt.ready != nil:
			if tt.ready(stderr.String()) {
				goto send
			}
		case tt.after > 0:
			time.Sleep(tt.after)
			goto send
		case strings.Contains(strings.Join(tt.args, " "), hang):
			if accepted.Load() > before {
				goto send
			}
		default:
			time.Sleep(500 * time.Millisecond)
			goto send
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never got there; stderr:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
send:
	time.Sleep(100 * time.Millisecond)
	if tt.refusable {
		select {
		case err := <-done:
			// It has ended by itself: by refusing its input, exit 2.
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Fatalf("ended before the signal with %v, want exit 2; stderr:\n%s", err, stderr.String())
			}
			return
		default:
		}
	}
	if tt.decoding {
		select {
		case <-done:
			return true
		default:
		}
		if accepted.Load() > before {
			return true // the decode is over: the signal would come too late
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(tt.sig); err != nil {
		if tt.decoding && errors.Is(err, os.ErrProcessDone) {
			return true
		}
		t.Fatal(err)
	}
	if tt.decoding && accepted.Load() > before {
		// The decode ended as the signal was sent. A decode that a
		// signal cannot cut short reaches the engine after it on every
		// try, and the caller fails once its tries are spent.
		return true
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(signalGrace):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		t.Fatalf("still running %s after %s; stderr:\n%s", signalGrace, tt.sig, stderr.String())
	}
	took := time.Since(sent)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 130 {
		t.Fatalf("exit %v after %s, want 130; stderr:\n%s", err, took.Round(time.Millisecond), stderr.String())
	}
	t.Logf("exit 130 %s after %s", took.Round(time.Millisecond), tt.sig)
	checkWhole(t, m.State)
	return false
}

// writeBigMesh writes a mesh file of 1.9 MB whose decode takes long: one
// container with 90,000 labels, half a second of CPU or more though
// decoding is linear (BenchmarkDecodeAdversarial; yaml.v3's own
// duplicate-key check took a minute). A signal 300ms after the start lands
// in the decode (the case's decoding checks it).
func writeBigMesh(t *testing.T, path string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("modules:\n  big:\n    containers:\n      app:\n        image: meshtest/busybox:1\n        labels:\n")
	// 90,000 labels: 1.9 MB, under the 2 MiB a mesh file may be.
	for i := range 90000 {
		fmt.Fprintf(&b, "          k%06d: v\n", i)
	}
	// The window run case's step: without it the window, its decode over,
	// exits 2 at once, and a signal sent just then finds it exited.
	b.WriteString("    steps:\n      nap:\n        exec: [/bin/sleep, \"60\"]\n")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// holdLock holds the state directory's lock name for the test's life, as
// another meshctl would.
func holdLock(name string) func(t *testing.T, m *meshctl) {
	return func(t *testing.T, m *meshctl) {
		d, err := state.Open(m.State)
		if err != nil {
			t.Fatal(err)
		}
		l, err := d.Lock(context.Background(), name, state.LockOptions{Command: "the test"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Unlock() })
	}
}

// checkWhole checks that nothing in the state directory is half-written:
// no temp file left, every JSON file whole.
func checkWhole(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil || e.IsDir() {
			return err
		}
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left: %s", p)
		}
		if strings.HasSuffix(e.Name(), ".json") {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil || v["version"] == nil {
				t.Errorf("%s is not whole: %v", p, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// hangingEngine listens on the unix socket sock and never answers; it
// counts the connections it accepted. With pings, it answers pings as an
// engine does and counts the other requests instead, each of which it
// never answers.
func hangingEngine(t *testing.T, sock string, pings bool) *atomic.Int64 {
	t.Helper()
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
			if pings {
				go answerPingsOnly(c, &n)
				continue
			}
			n.Add(1)
			go func() { _, _ = io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return &n
}

// answerPingsOnly answers the pings on c as an engine does, and reads
// whatever follows the first other request, which it counts in n and never
// answers.
func answerPingsOnly(c net.Conn, n *atomic.Int64) {
	r := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		if !strings.HasSuffix(req.URL.Path, "/_ping") {
			n.Add(1)
			_, _ = io.Copy(io.Discard, r)
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		body := "OK"
		if req.Method == http.MethodHead {
			body = ""
		}
		if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nApi-Version: 1.41\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n\r\n%s", body); err != nil {
			return
		}
	}
}

// shortTempDir is a temp dir whose path is short enough for a unix socket
// (at most 107 bytes).
func shortTempDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "msig")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}
