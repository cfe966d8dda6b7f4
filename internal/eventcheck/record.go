package eventcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Event is one container event of the engine.
type Event struct {
	Action string
	Detail string // what follows the action's colon: "healthy" of "health_status: healthy"
	ID     string
	Name   string
	Labels map[string]string
	At     time.Time
}

// Recorder keeps the container events of an engine, from the moment
// Record returned, of the containers keep accepts.
type Recorder struct {
	client *http.Client
	keep   func(name string, labels map[string]string) bool
	cancel context.CancelFunc
	ended  chan struct{}

	mu     sync.Mutex
	events []Event
	synced map[string]bool // sentinels whose destroy event came
	err    error
	wake   chan struct{} // closed and replaced on every event
}

// Record starts following the container events of the engine at host
// (unix:///path). keep selects the containers to remember by their name,
// without "/", and labels. A nil keep keeps all. Stop ends it.
func Record(ctx context.Context, host string, keep func(name string, labels map[string]string) bool) (*Recorder, error) {
	sock := strings.TrimPrefix(host, "unix://")
	r := &Recorder{
		client: &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}},
		keep:   keep,
		synced: map[string]bool{},
		ended:  make(chan struct{}),
		wake:   make(chan struct{}),
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	filters := url.QueryEscape(`{"type":["container"]}`)
	req, err := http.NewRequestWithContext(ctx, "GET", "http://docker/events?filters="+filters, nil)
	if err != nil {
		r.cancel()
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("engine events: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		r.cancel()
		return nil, fmt.Errorf("engine events: %s", resp.Status)
	}
	go r.follow(resp.Body)
	return r, nil
}

// message is an engine event as the API sends it.
type message struct {
	Type   string
	Action string
	Actor  struct {
		ID         string
		Attributes map[string]string
	}
	TimeNano int64 `json:"timeNano"`
}

// follow decodes the stream until it ends.
func (r *Recorder) follow(body io.ReadCloser) {
	defer close(r.ended)
	defer body.Close()
	dec := json.NewDecoder(body)
	for {
		var m message
		if err := dec.Decode(&m); err != nil {
			r.finish(err)
			return
		}
		r.add(toEvent(m))
	}
}

// toEvent keeps what the checks need. The labels are the attributes other
// than the engine's own (name, image, exitCode…).
func toEvent(m message) Event {
	e := Event{Action: m.Action, ID: m.Actor.ID, At: time.Unix(0, m.TimeNano), Labels: map[string]string{}}
	for k, v := range m.Actor.Attributes {
		switch k {
		case "name":
			e.Name = v
		case "image", "exitCode", "signal", "oldName", "execID":
		default:
			e.Labels[k] = v
		}
	}
	// Exec events read "exec_start: sh -c …". The action is the first word.
	if i := strings.Index(e.Action, ":"); i > 0 {
		e.Action, e.Detail = e.Action[:i], strings.TrimSpace(e.Action[i+1:])
	}
	return e
}

func (r *Recorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.HasPrefix(e.Name, syncPrefix) {
		r.synced[e.Name] = r.synced[e.Name] || e.Action == "destroy"
	} else if r.keep == nil || r.keep(e.Name, e.Labels) || r.known(e.ID) {
		r.events = append(r.events, e)
	}
	close(r.wake)
	r.wake = make(chan struct{})
}

// known reports whether an event of id was kept already. A rename keeps
// following the container it first kept. The caller holds r.mu.
func (r *Recorder) known(id string) bool {
	for i := len(r.events) - 1; i >= 0; i-- {
		if r.events[i].ID == id {
			return true
		}
	}
	return false
}

func (r *Recorder) finish(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !errors.Is(err, context.Canceled) {
		r.err = err
	}
	close(r.wake)
}

// Events returns the events kept so far, in the engine's order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// Err returns why the stream ended early, if it did.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Stop ends the stream.
func (r *Recorder) Stop() {
	r.cancel()
	<-r.ended
	r.client.CloseIdleConnections()
}
