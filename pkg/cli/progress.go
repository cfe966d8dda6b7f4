package cli

import (
	"fmt"
	"io"
	"sync"

	"github.com/meshctl/meshctl/pkg/engine"
)

// progress is where a command's progress goes (stderr). Piped, it is plain
// lines. On a terminal, each item, such as a container or a step, has a
// line of its own updated in place. Pulls show the engine's layer progress.
// The rendering is the Docker CLI's own (engine.Renderer), so meshctl
// writes no terminal codes of its own. Under -q nothing is shown.
type progress struct {
	mu    sync.Mutex
	out   io.Writer
	quiet bool
	tty   bool
	fd    uintptr
	// r renders on a terminal (engine.Renderer). It is nil when piped or closed.
	r *engine.Renderer
}

func newProgress(out io.Writer, fd uintptr, tty, quiet bool) *progress {
	p := &progress{out: out, quiet: quiet, tty: tty && !quiet, fd: fd}
	if p.tty {
		p.r = engine.NewRenderer(out, fd)
	}
	return p
}

// Linef writes a line of progress.
func (p *progress) Linef(format string, args ...any) {
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.r.Text(fmt.Sprintf(format, args...))
		return
	}
	fmt.Fprintf(p.out, format, args...)
}

// Live reports whether progress is shown on a terminal, where Status lines
// update in place.
func (p *progress) Live() bool { return p.tty }

// Status sets item id's line to msg, in place, on a terminal. Piped, it
// shows nothing, since the plain lines say what happens.
func (p *progress) Status(id, msg string) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r.Status(id, msg)
}

// Output is a writer for a step's output. On a terminal it goes through the
// renderer, so that the lines it updates stay where it put them.
func (p *progress) Output(w io.Writer) io.Writer {
	if !p.tty {
		return w
	}
	return writerFunc(func(b []byte) (int, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.r.Text(string(b))
		return len(b), nil
	})
}

// PullOutput is where an engine pull shows its layers. On a terminal, it
// is the engine's own progress bars. Piped, it is nothing, since a pull is
// one plain line.
func (p *progress) PullOutput() io.Writer {
	if !p.tty {
		return nil
	}
	return &pullWriter{p: p}
}

// pullWriter writes a pull's rendering straight to the terminal. It
// reports being one, and engine.Pull renders for a terminal when its
// writer says so.
type pullWriter struct{ p *progress }

func (w *pullWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.out.Write(b)
}

// Terminal says that the writer is a terminal, and its descriptor.
func (w *pullWriter) Terminal() (uintptr, bool) { return w.p.fd, true }

// Close lets the renderer finish.
func (p *progress) Close() {
	if p.r != nil {
		p.r.Close()
		p.r = nil
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }
