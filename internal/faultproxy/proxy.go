package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Class is a kind of fault.
type Class string

// The fault classes.
const (
	// Fail answers 500 with a Docker-style JSON error, without forwarding.
	// The engine never sees the call.
	Fail Class = "fail"
	// Delay waits before forwarding.
	Delay Class = "delay"
	// Hang never forwards nor answers. The call lasts until the client gives
	// up and its connection closes, or until the proxy closes.
	Hang Class = "hang"
	// Drop forwards the call and lets the engine act and answer. Then it
	// closes the client's connection without answering, so the answer is
	// lost.
	Drop Class = "drop"
)

// Classes lists every fault class.
var Classes = []Class{Fail, Delay, Hang, Drop}

// Proxy is a running fault-injecting proxy. Its methods are safe for
// concurrent use.
type Proxy struct {
	socket   string
	upstream string
	ln       net.Listener
	srv      *http.Server
	tr       *http.Transport
	done     chan struct{}

	mu      sync.Mutex
	sched   *Schedule
	calls   []Call
	tunnels map[net.Conn]bool
}

// Call is one API call the proxy saw.
type Call struct {
	Method string
	Route  string // as Route gives it
	Path   string // as sent, with the query
	Fault  Class  // "" when none was injected
	At     time.Time
	// PID is the client's process id, as the socket's peer credentials
	// give it; 0 when unknown.
	PID int
}

// peerKey is the context key under which a connection keeps its client's
// process id.
type peerKey struct{}

// Start listens on the unix socket path and forwards to the engine at
// upstream. upstream is a unix socket path, or unix:///path. Start faults
// calls as sched says. A nil sched faults none.
func Start(socket, upstream string, sched *Schedule) (*Proxy, error) {
	upstream = trimUnix(upstream)
	_ = os.Remove(socket)
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	if sched == nil {
		sched = NewSchedule(0)
	}
	p := &Proxy{
		socket: socket, upstream: upstream, ln: ln,
		done: make(chan struct{}), sched: sched, tunnels: map[net.Conn]bool{},
		tr: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", upstream)
			},
			DisableCompression: true,
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerPID(c))
		}}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

func trimUnix(s string) string {
	const scheme = "unix://"
	if len(s) > len(scheme) && s[:len(scheme)] == scheme {
		return s[len(scheme):]
	}
	return s
}

// Host returns the proxy's address for --docker-host, unix:///path.
func (p *Proxy) Host() string { return "unix://" + p.socket }

// SetSchedule replaces the schedule. A nil schedule means no faults. Calls
// already in flight keep theirs.
func (p *Proxy) SetSchedule(s *Schedule) {
	if s == nil {
		s = NewSchedule(0)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sched = s
}

// Calls returns the calls seen so far, in arrival order.
func (p *Proxy) Calls() []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Call(nil), p.calls...)
}

// CallsSince returns the calls seen after the first n, in arrival order.
func (p *Proxy) CallsSince(n int) []Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > len(p.calls) {
		n = len(p.calls)
	}
	return append([]Call(nil), p.calls[n:]...)
}

// Counts returns how many faults of each class were injected.
func (p *Proxy) Counts() map[Class]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := map[Class]int{}
	for _, c := range p.calls {
		if c.Fault != "" {
			n[c.Fault]++
		}
	}
	return n
}

// Close stops listening and releases every hung call, closing its connection
// unanswered. It also closes every tunnel.
func (p *Proxy) Close() error {
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return nil
	default:
	}
	close(p.done)
	for c := range p.tunnels {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.srv.Close()
	p.tr.CloseIdleConnections()
	_ = os.Remove(p.socket)
	return err
}

// decide records the call and returns the fault the schedule gives it.
func (p *Proxy) decide(r *http.Request) (Class, Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	route := Route(r.URL.Path)
	rule, ok := p.sched.next(r.Method, route)
	pid, _ := r.Context().Value(peerKey{}).(int)
	c := Call{Method: r.Method, Route: route, Path: r.URL.RequestURI(), At: time.Now(), PID: pid}
	if ok {
		c.Fault = rule.Class
	}
	p.calls = append(p.calls, c)
	return c.Fault, rule
}

// serve is the proxy's handler. It injects the call's fault, if any, and
// forwards.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	class, rule := p.decide(r)
	switch class {
	case Fail:
		p.fail(w, r, rule)
		return
	case Hang:
		p.hang(w, r)
		return
	case Delay:
		if !p.sleep(r.Context(), rule.Delay) {
			return
		}
	}
	if isUpgrade(r) {
		p.tunnel(w, r)
		return
	}
	p.forward(w, r, class == Drop)
}

// fail answers as the engine does when a call fails.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, rule Rule) {
	code := rule.Status
	if code == 0 {
		code = http.StatusInternalServerError
	}
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, "{\"message\":%q}\n", fmt.Sprintf("faultproxy: injected failure of %s %s", r.Method, r.URL.Path))
}

// hang waits until the client gives up or the proxy closes, then closes
// the connection unanswered.
func (p *Proxy) hang(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-p.done:
	}
	closeUnanswered(w)
}

// sleep waits d. It returns false if the client gave up or the proxy closed
// first.
func (p *Proxy) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-p.done:
	}
	return false
}

// closeUnanswered closes the client's connection without an answer.
func closeUnanswered(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		// Not hijackable, as never for HTTP/1. Abort the handler instead,
		// which net/http turns into a closed connection.
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// forward sends the call to the engine and streams its answer back. With
// drop, it lets the engine answer, then closes the client's connection
// without passing the answer on.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, drop bool) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "http", "docker"
	out.Host = "docker"
	resp, err := p.tr.RoundTrip(out)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		http.Error(w, fmt.Sprintf("{\"message\":%q}", "faultproxy: "+err.Error()), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if drop {
		// The engine has acted, and its answer's head is here. Read a little
		// of the body, such as a create's id, then lose it all.
		_, _ = io.CopyN(io.Discard, resp.Body, 64<<10)
		closeUnanswered(w)
		return
	}
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	copyFlushing(w, resp.Body)
}

// copyFlushing copies the answer's body, flushing after every read. So
// streams reach the client as they come, such as events, logs, wait and pull
// progress.
func copyFlushing(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			return
		}
	}
}
