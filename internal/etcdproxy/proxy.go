// Package etcdproxy is test support, a TCP proxy in front of etcd. It reads
// the HTTP/2 frames of the gRPC calls that pass, and tells each call by its
// method. By a rule, it loses the Nth matching call's answer. The call then
// reaches etcd and is carried out, but the connection is cut before the
// answer comes back. Or it refuses the call: the connection is cut before
// the call reaches etcd.
//
// The proxy lives in the test's process, and meshctl processes are pointed
// at it (--ledger etcd://Proxy.Addr()/prefix). So answers are lost across
// processes, with no hook in meshctl itself. It speaks cleartext HTTP/2
// only, as the test cluster does.
package etcdproxy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2/hpack"
)

// Action is what a rule does to the call it matches.
type Action int

const (
	// LoseAnswer lets the call reach etcd, then cuts the connection
	// before its answer reaches the client.
	LoseAnswer Action = iota
	// Refuse cuts the connection before the call reaches etcd.
	Refuse
)

// Rule matches the Nth call (from 1, counted across connections) whose
// gRPC method ends with Method, such as "KV/Txn" or "Lease/LeaseGrant". An
// empty Method matches every call. With For, it also matches every later
// matching call for that long after the Nth: etcd is then out of reach of
// the proxy's clients, as across a partition.
type Rule struct {
	Method string
	Nth    int
	Action Action
	For    time.Duration
}

// Proxy forwards one listening address to one etcd endpoint.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	rules []Rule
	// counts are the calls each rule matched so far, by rule.
	counts []int
	// until is when each rule's For ends, once its Nth call came.
	until  []time.Time
	calls  []string
	fired  []string
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 and forwards to target (HOST:PORT).
func Start(target string, rules ...Rule) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.SetRules(rules...)
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr is the proxy's HOST:PORT.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetRules replaces the rules. Their counts start from zero.
func (p *Proxy) SetRules(rules ...Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules, p.counts, p.until = rules, make([]int, len(rules)), make([]time.Time, len(rules))
}

// Calls are the methods of the calls seen so far, in order.
func (p *Proxy) Calls() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.calls...)
}

// Fired says which rules acted, as "lost METHOD #N" or "refused METHOD #N".
func (p *Proxy) Fired() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.fired...)
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.relay(c)
		}()
	}
}

// track records an open connection. It reports false once the proxy is
// closed, and then the connection is closed.
func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			_ = c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		_ = c.Close()
	}
}

// conn is one client connection and its connection to etcd.
type conn struct {
	p              *Proxy
	client, server net.Conn
	once           sync.Once
	mu             sync.Mutex
	// lose are the streams whose answer is to be lost.
	lose map[uint32]string
}

func (p *Proxy) relay(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	c := &conn{p: p, client: client, server: server, lose: map[uint32]string{}}
	defer p.untrack(client, server)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.answers()
	}()
	c.calls()
	<-done
}

// cut closes both sides, once.
func (c *conn) cut() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// HTTP/2 frame types and flags this proxy reads (RFC 9113 §6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	frameContinuation = 0x9
	flagEndHeaders    = 0x4
	flagPadded        = 0x8
	flagPriority      = 0x20
)

const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// maxFrame bounds a frame's payload. gRPC's default is 16 KiB; etcd's
// requests stay far below 16 MiB.
const maxFrame = 16 << 20

type frame struct {
	header [9]byte
	body   []byte
}

func (f *frame) kind() byte      { return f.header[3] }
func (f *frame) flags() byte     { return f.header[4] }
func (f *frame) stream() uint32  { return binary.BigEndian.Uint32(f.header[5:9]) & 0x7fffffff }
func (f *frame) bytes() [][]byte { return [][]byte{f.header[:], f.body} }

func readFrame(r io.Reader) (*frame, error) {
	f := &frame{}
	if _, err := io.ReadFull(r, f.header[:]); err != nil {
		return nil, err
	}
	n := int(f.header[0])<<16 | int(f.header[1])<<8 | int(f.header[2])
	if n > maxFrame {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	f.body = make([]byte, n)
	_, err := io.ReadFull(r, f.body)
	return f, err
}

// headerBlock is the header block fragment of a HEADERS frame, without its
// padding and priority.
func headerBlock(f *frame) ([]byte, error) {
	b := f.body
	pad := 0
	if f.flags()&flagPadded != 0 {
		if len(b) < 1 {
			return nil, errors.New("short padded frame")
		}
		pad, b = int(b[0]), b[1:]
	}
	if f.flags()&flagPriority != 0 {
		if len(b) < 5 {
			return nil, errors.New("short priority")
		}
		b = b[5:]
	}
	if pad > len(b) {
		return nil, errors.New("padding past the frame")
	}
	return b[:len(b)-pad], nil
}

func write(w io.Writer, parts ...[]byte) error {
	for _, b := range parts {
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	return nil
}

// calls forwards the client's frames to etcd. Each call's headers are
// decoded to find its method, and the rules are applied to it.
func (c *conn) calls() {
	defer c.cut()
	pre := make([]byte, len(preface))
	if _, err := io.ReadFull(c.client, pre); err != nil || string(pre) != preface {
		return
	}
	if write(c.server, pre) != nil {
		return
	}
	dec := hpack.NewDecoder(4096, nil)
	for {
		f, err := readFrame(c.client)
		if err != nil {
			return
		}
		frames := []*frame{f}
		if f.kind() == frameHeaders {
			var block bytes.Buffer
			b, err := headerBlock(f)
			if err != nil {
				return
			}
			block.Write(b)
			for last := f; last.flags()&flagEndHeaders == 0; {
				if last, err = readFrame(c.client); err != nil || last.kind() != frameContinuation {
					return
				}
				frames = append(frames, last)
				block.Write(last.body)
			}
			fields, err := dec.DecodeFull(block.Bytes())
			if err != nil {
				return
			}
			if c.onCall(f.stream(), fields) == Refuse {
				return
			}
		}
		for _, f := range frames {
			if write(c.server, f.bytes()...) != nil {
				return
			}
		}
	}
}

// noAction is a call no rule matched.
const noAction Action = -1

// onCall counts a call and applies the rule that matches it, if any.
func (c *conn) onCall(stream uint32, fields []hpack.HeaderField) Action {
	method := ""
	for _, hf := range fields {
		if hf.Name == ":path" {
			method = hf.Value
		}
	}
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls = append(p.calls, method)
	action := noAction
	for i, r := range p.rules {
		if !strings.HasSuffix(method, r.Method) {
			continue
		}
		p.counts[i]++
		now := time.Now()
		if p.counts[i] == r.Nth {
			p.until[i] = now.Add(r.For)
		}
		if p.counts[i] < r.Nth || (p.counts[i] > r.Nth && !now.Before(p.until[i])) || action != noAction {
			continue
		}
		action = r.Action
		switch r.Action {
		case Refuse:
			p.fired = append(p.fired, fmt.Sprintf("refused %s #%d", method, p.counts[i]))
		default:
			p.fired = append(p.fired, fmt.Sprintf("lost %s #%d", method, p.counts[i]))
			c.mu.Lock()
			c.lose[stream] = method
			c.mu.Unlock()
		}
	}
	return action
}

// answers forwards etcd's frames to the client. The first frame of a
// stream whose answer is to be lost cuts the connection instead.
func (c *conn) answers() {
	defer c.cut()
	for {
		f, err := readFrame(c.server)
		if err != nil {
			return
		}
		if k := f.kind(); k == frameHeaders || k == frameData {
			c.mu.Lock()
			_, lose := c.lose[f.stream()]
			c.mu.Unlock()
			if lose {
				return
			}
		}
		if write(c.client, f.bytes()...) != nil {
			return
		}
	}
}
