package engine

import (
	"encoding/json"
	"io"

	"github.com/docker/docker/pkg/jsonmessage"
)

// Renderer draws progress on a terminal as the Docker CLI does.
// Each item has a line of its own, updated in place.
// It lives here so that only this package imports the Docker module.
// Its methods are not safe for concurrent use. The caller serializes them.
type Renderer struct {
	// Messages go through a pipe to one jsonmessage renderer.
	// It keeps track of the lines it can update.
	pw   *io.PipeWriter
	done chan struct{}
}

// NewRenderer starts a renderer that writes to out, the terminal fd.
func NewRenderer(out io.Writer, fd uintptr) *Renderer {
	pr, pw := io.Pipe()
	r := &Renderer{pw: pw, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := jsonmessage.DisplayJSONMessagesStream(pr, out, fd, true, nil); err != nil {
			// A renderer that failed (a closed terminal) must not block
			// the work. Drain what comes.
			_, _ = io.Copy(io.Discard, pr)
		}
	}()
	return r
}

// Text writes s as it is, below the lines the renderer updates.
func (r *Renderer) Text(s string) { r.send(jsonmessage.JSONMessage{Stream: s}) }

// Status sets item id's line to msg, in place.
func (r *Renderer) Status(id, msg string) {
	// An empty Progress makes the renderer clear the line before it
	// writes the new status over it.
	r.send(jsonmessage.JSONMessage{ID: id, Status: msg, Progress: &jsonmessage.JSONProgress{}})
}

// send renders one message and returns once it is on the terminal.
// The blank written after it is read only when the renderer asks for more.
// By then it has displayed the message.
func (r *Renderer) send(m jsonmessage.JSONMessage) {
	b, _ := json.Marshal(m)
	_, _ = r.pw.Write(append(b, '\n'))
	_, _ = r.pw.Write([]byte{' '})
}

// Close lets the renderer finish what it was sent.
func (r *Renderer) Close() {
	r.pw.Close()
	<-r.done
}
