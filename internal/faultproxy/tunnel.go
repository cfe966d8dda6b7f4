package faultproxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
)

// isUpgrade reports whether r asks to take over its connection (Connection:
// Upgrade). The engine's attach and exec start do.
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, tok := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}

// tunnel passes an upgraded connection through. The request goes to the
// engine as it came. Then bytes flow both ways untouched until either side
// closes.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request) {
	up, err := net.Dial("unix", p.upstream)
	if err != nil {
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	if err := r.Write(up); err != nil {
		_ = up.Close()
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	down, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = up.Close()
		return
	}
	if !p.track(up, down) {
		return
	}
	defer p.untrack(up, down)
	pipe(up, down, buf)
}

// track records the tunnel's connections, so Close can end them. When the
// proxy is already closed, track closes both and returns false.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	default:
	}
	for _, c := range conns {
		p.tunnels[c] = true
	}
	return true
}

func (p *Proxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.tunnels, c)
		_ = c.Close()
	}
}

// pipe copies both ways until one side is done, then closes both. What the
// client sent beyond the request, in buf, goes first.
func pipe(up, down net.Conn, buf *bufio.ReadWriter) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(up, buf.Reader)
		closeWrite(up)
	}()
	go func() {
		defer wg.Done()
		_, _ = io.Copy(down, up)
		closeWrite(down)
	}()
	wg.Wait()
}

// closeWrite half-closes c where it can. So the other side sees EOF and can
// still answer.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}
