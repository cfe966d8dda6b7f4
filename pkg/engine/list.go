package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
)

// listed is one entry of the engine's container list, with only the fields
// meshctl reads: the engine's answer also carries ports, mounts, networks
// and more, which the Docker client's container.Summary decodes, for
// nothing, on every no-op apply.
type listed struct {
	ID      string            `json:"Id"`
	Names   []string          `json:"Names"`
	Image   string            `json:"Image"`
	ImageID string            `json:"ImageID"`
	Created int64             `json:"Created"`
	State   string            `json:"State"`
	Status  string            `json:"Status"`
	Labels  map[string]string `json:"Labels"`
}

func (c *dockerClient) List(ctx context.Context, labels map[string]string) ([]Container, error) {
	args := filters.NewArgs()
	for k, v := range labels {
		if v == "" {
			args.Add("label", k)
		} else {
			args.Add("label", k+"="+v)
		}
	}
	var list []listed
	err := c.do(ctx, "list containers", func(ctx context.Context) error {
		list = list[:0] // a retry starts over
		return c.get(ctx, "/containers/json", args, func(body io.Reader) error {
			return decodeList(body, &list)
		})
	})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	out := make([]Container, 0, len(list))
	for _, s := range list {
		ct := Container{
			ID:      s.ID,
			Name:    summaryName(s.Names),
			Image:   s.Image,
			ImageID: s.ImageID,
			State:   s.State,
			Running: s.State == "running" || s.State == "paused" || s.State == "restarting",
			Labels:  s.Labels,
			Health:  summaryHealth(s.Status),
		}
		if s.State == "running" && restartedLately(s.Status, time.Unix(s.Created, 0), now) {
			if err := c.inspectStart(ctx, &ct); err != nil {
				return nil, err
			}
		}
		out = append(out, ct)
	}
	slices.SortFunc(out, func(a, b Container) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// inspectStart fills in ct's restart count and start, which the list lacks.
// StateOf needs them for a container restarted lately, and only for one.
// A container removed since the list keeps what the list said.
func (c *dockerClient) inspectStart(ctx context.Context, ct *Container) error {
	full, err := c.Inspect(ctx, ct.ID)
	if IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	ct.RestartCount, ct.StartedAt, ct.Restarting = full.RestartCount, full.StartedAt, full.Restarting
	return nil
}

// get sends GET p (all=1, and the filters args) and gives the answer's
// body to decode. The path has no API version: the engine answers in its
// own, which needs no negotiation first, and the fields listed reads are
// the same in every version meshctl supports (1.41 and newer).
func (c *dockerClient) get(ctx context.Context, p string, args filters.Args, decode func(io.Reader) error) error {
	q := url.Values{"all": {"1"}}
	if args.Len() > 0 {
		f, err := filters.ToJSON(args)
		if err != nil {
			return err
		}
		q.Set("filters", f)
	}
	host := c.url.Host
	if c.url.Scheme == "unix" || c.url.Scheme == "npipe" {
		// The transport dials the socket; the host is a dummy.
		host = client.DummyHost
	}
	u := url.URL{Scheme: "http", Host: host, Path: path.Join(c.url.Path, p), RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var msg struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Message == "" {
			msg.Message = strings.TrimSpace(string(body))
		}
		err := fmt.Errorf("Error response from daemon: %s", msg.Message)
		if resp.StatusCode == http.StatusNotFound {
			return notFoundError{err}
		}
		return err
	}
	if err := decode(resp.Body); err != nil {
		return errors.Join(fmt.Errorf("decode the answer of GET %s", p), err)
	}
	return nil
}
