package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestRoute(t *testing.T) {
	for in, want := range map[string]string{
		"/v1.41/containers/ab12/stop":           "/containers/{id}/stop",
		"/containers/flt.svc.meshctl-old/json":  "/containers/{id}/json",
		"/v1.41/containers/json":                "/containers/json",
		"/v1.41/containers/create":              "/containers/create",
		"/v1.41/containers/ab12":                "/containers/{id}",
		"/v1.41/images/meshtest/busybox:1/json": "/images/{id}/json",
		"/v1.41/images/create":                  "/images/create",
		"/_ping":                                "/_ping",
		"/v1.41/events":                         "/events",
		"/v1.41/exec/e1/start":                  "/exec/{id}/start",
	} {
		if got := Route(in); got != want {
			t.Errorf("Route(%q) = %q, want %q", in, got, want)
		}
	}
}

// backend is a stand-in engine on a unix socket that counts the calls it
// carried out.
type backend struct {
	socket string
	acted  atomic.Int64
}

func newBackend(t *testing.T) *backend {
	t.Helper()
	b := &backend{socket: filepath.Join(t.TempDir(), "engine.sock")}
	ln, err := net.Listen("unix", b.socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b.acted.Add(1)
		fmt.Fprintf(w, "{\"path\":%q}", r.URL.Path)
	})
	mux.HandleFunc("/v1.41/events", b.events)
	mux.HandleFunc("/v1.41/containers/x/attach", b.echo)
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return b
}

// events streams a line, then waits for the client to go away.
func (b *backend) events(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintln(w, `{"Action":"start"}`)
	http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

// echo takes the connection over, as attach does, and echoes each line.
func (b *backend) echo(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	fmt.Fprint(conn, "HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	line, _ := buf.ReadString('\n')
	fmt.Fprint(conn, "echo "+line)
}

// start returns a proxy in front of b with the rules, and an HTTP client of it.
func start(t *testing.T, b *backend, rules ...Rule) (*Proxy, *http.Client) {
	t.Helper()
	p, err := Start(filepath.Join(t.TempDir(), "proxy.sock"), "unix://"+b.socket, NewSchedule(1, rules...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", strings.TrimPrefix(p.Host(), "unix://"))
	}}}
	return p, c
}

func call(ctx context.Context, c *http.Client, method, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func TestFaultProxyFail(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b, Rule{Method: "POST", Route: "/containers/{id}/stop", Class: Fail})
	code, body, err := call(t.Context(), c, "POST", "/v1.41/containers/x/stop")
	if err != nil || code != 500 || !strings.Contains(body, `"message":"faultproxy: injected failure`) {
		t.Fatalf("failed call: %d %q %v; want 500 with a Docker-style message", code, body, err)
	}
	if b.acted.Load() != 0 {
		t.Fatal("a failed call reached the engine")
	}
	// Another route and another method pass.
	for _, mp := range [][2]string{{"POST", "/v1.41/containers/x/start"}, {"GET", "/v1.41/containers/x/stop"}} {
		if code, _, err := call(t.Context(), c, mp[0], mp[1]); err != nil || code != 200 {
			t.Fatalf("%s %s: %d %v, want 200", mp[0], mp[1], code, err)
		}
	}
	if got := p.Counts(); got[Fail] != 1 || len(got) != 1 {
		t.Fatalf("counts %v, want one fail", got)
	}
}

func TestFaultProxyNth(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b, Rule{Route: "/containers/{id}", Nth: 2, Class: Fail})
	var codes []int
	for range 3 {
		code, _, err := call(t.Context(), c, "DELETE", "/v1.41/containers/x")
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, code)
	}
	if fmt.Sprint(codes) != "[200 500 200]" {
		t.Fatalf("codes %v, want only the second call failed", codes)
	}
	if calls := p.Calls(); len(calls) != 3 || calls[1].Fault != Fail || calls[1].Route != "/containers/{id}" {
		t.Fatalf("calls %+v", calls)
	}
}

func TestFaultProxyDrop(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b, Rule{Route: "/containers/create", Class: Drop})
	_, _, err := call(t.Context(), c, "POST", "/v1.41/containers/create")
	if err == nil {
		t.Fatal("a dropped answer arrived")
	}
	if b.acted.Load() != 1 {
		t.Fatalf("the engine carried out %d calls, want 1: drop acts, then loses the answer", b.acted.Load())
	}
	if p.Counts()[Drop] != 1 {
		t.Fatalf("counts %v", p.Counts())
	}
}

func TestFaultProxyHang(t *testing.T) {
	b := newBackend(t)
	p, c := start(t, b, Rule{Route: "/containers/json", Class: Hang})
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, _, err := call(ctx, c, "GET", "/v1.41/containers/json"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("hung call ended with %v, want the client's deadline", err)
	}
	// A hang the client does not give up on ends when the proxy closes.
	errc := make(chan error, 1)
	go func() {
		_, _, err := call(t.Context(), c, "GET", "/v1.41/containers/json")
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_ = p.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("a hung call was answered")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not release a hung call")
	}
	if b.acted.Load() != 0 {
		t.Fatal("a hung call reached the engine")
	}
	// The harness signals the process whose call hangs: each call names
	// its client's process, here this one.
	for _, x := range p.Calls() {
		if x.PID != os.Getpid() {
			t.Fatalf("call %s %s: client process %d, want %d", x.Method, x.Path, x.PID, os.Getpid())
		}
	}
}

func TestFaultProxyDelay(t *testing.T) {
	b := newBackend(t)
	_, c := start(t, b, Rule{Route: "/containers/{id}/start", Class: Delay, Delay: 200 * time.Millisecond})
	begin := time.Now()
	code, _, err := call(t.Context(), c, "POST", "/v1.41/containers/x/start")
	if err != nil || code != 200 || time.Since(begin) < 200*time.Millisecond {
		t.Fatalf("delayed call: %d %v after %s", code, err, time.Since(begin))
	}
}

func TestFaultProxyProbIsSeeded(t *testing.T) {
	faults := func() string {
		b := newBackend(t)
		p, c := start(t, b, Rule{Prob: 0.5, Class: Fail})
		for range 20 {
			if _, _, err := call(t.Context(), c, "GET", "/v1.41/containers/json"); err != nil {
				t.Fatal(err)
			}
		}
		var s strings.Builder
		for _, x := range p.Calls() {
			s.WriteString(string(x.Fault) + ",")
		}
		return s.String()
	}
	a, b := faults(), faults()
	if a != b || !strings.Contains(a, "fail") || !strings.Contains(a, ",,") {
		t.Fatalf("two runs of one seed faulted %q and %q: want the same mix", a, b)
	}
}

func TestFaultProxyStreams(t *testing.T) {
	b := newBackend(t)
	_, c := start(t, b)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://docker/v1.41/events", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The engine has not ended its answer: the line must come through now.
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.Contains(line, "start") {
		t.Fatalf("first event: %q %v", line, err)
	}
}

func TestFaultProxyUpgrade(t *testing.T) {
	b := newBackend(t)
	p, _ := start(t, b)
	conn, err := net.Dial("unix", strings.TrimPrefix(p.Host(), "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(conn, "POST /v1.41/containers/x/attach HTTP/1.1\r\nHost: docker\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n")
	r := bufio.NewReader(conn)
	status, _ := r.ReadString('\n')
	if !strings.Contains(status, "101") {
		t.Fatalf("status %q, want 101", status)
	}
	for {
		l, err := r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if l == "\r\n" {
			break
		}
	}
	fmt.Fprint(conn, "hello\n")
	if l, err := r.ReadString('\n'); err != nil || l != "echo hello\n" {
		t.Fatalf("through the tunnel: %q %v", l, err)
	}
}

func TestScheduleOrdinalsAreEachRulesOwn(t *testing.T) {
	s := NewSchedule(1,
		Rule{Route: "/containers/json", Nth: 1, Class: Delay},
		Rule{Route: "/containers/json", Nth: 2, Class: Fail},
		Rule{Route: "/containers/json", Nth: 1, Class: Hang})
	var got []Class
	for range 3 {
		r, _ := s.next("GET", "/containers/json")
		got = append(got, r.Class)
	}
	// The third rule's first call is the first call, which the first rule
	// faulted: it never fires on a later one.
	if fmt.Sprint(got) != "[delay fail ]" {
		t.Fatalf("faults %v, want [delay fail ]", got)
	}
}
