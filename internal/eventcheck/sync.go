package eventcheck

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
)

// syncPrefix names the sentinel containers Sync makes.
const syncPrefix = "eventcheck-sync-"

// Sync returns once the recorder holds every event the engine made before
// Sync was called. It creates and removes a sentinel container of image,
// never started. Then it waits for its destroy event, which the engine sends
// after every earlier one.
func (r *Recorder) Sync(ctx context.Context, image string) error {
	name := fmt.Sprintf("%s%08x", syncPrefix, rand.Uint32())
	body := fmt.Sprintf(`{"Image":%q,"Cmd":["true"],"HostConfig":{"NetworkMode":"none"}}`, image)
	if err := r.api(ctx, "POST", "/containers/create?name="+name, body); err != nil {
		return err
	}
	if err := r.api(ctx, "DELETE", "/containers/"+name+"?force=1", ""); err != nil {
		return err
	}
	for {
		r.mu.Lock()
		seen, wake, err := r.synced[name], r.wake, r.err
		r.mu.Unlock()
		switch {
		case seen:
			return nil
		case err != nil:
			return fmt.Errorf("engine events ended: %w", err)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return fmt.Errorf("engine events: no destroy event of %s: %w", name, ctx.Err())
		}
	}
}

// api makes one engine call and fails on an answer other than 2xx.
func (r *Recorder) api(ctx context.Context, method, path, body string) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://docker"+path, bytes.NewBufferString(body))
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
