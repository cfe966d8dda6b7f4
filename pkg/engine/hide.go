package engine

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/docker/docker/api/types/container"
)

// minHidden is the length from which an environment value is hidden in the
// engine's words. A shorter one such as "1", "on" or "80" is no secret.
// Hiding it would blank every "exited 1" and "port 80".
const minHidden = 4

// hideEnv returns text with each value of env ("K=V") of minHidden characters
// or more replaced by "[value of K]". The engine's errors can quote the
// container's environment, as runc's "exec: … PW=…" does. So can a
// container's log tail and its probe's output. meshctl prints and keeps them,
// and CONTRACT §4 says no value of env or env-file is ever printed.
func hideEnv(text string, env []string) string {
	type pair struct{ key, value string }
	var pairs []pair
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		// The value as it is, and as Go quotes it (runc's "PW=S3CRET\x00…").
		// Then each run of it between control characters.
		forms := append([]string{v, quoted(v)}, strings.FieldsFunc(v, unicode.IsControl)...)
		for _, f := range forms {
			if len(f) >= minHidden {
				pairs = append(pairs, pair{k, f})
			}
		}
	}
	// The longest first, so that a value holding another is hidden whole.
	sort.SliceStable(pairs, func(i, j int) bool { return len(pairs[i].value) > len(pairs[j].value) })
	for _, p := range pairs {
		text = strings.ReplaceAll(text, p.value, "[value of "+p.key+"]")
	}
	return text
}

// quoted is s as strconv.Quote writes it, without the quotes.
func quoted(s string) string {
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// hiddenError is an engine error whose text has the container's environment
// hidden (hideEnv). errors.Is and errors.As still see the engine's error
// beneath.
type hiddenError struct {
	text string
	err  error
}

func (e *hiddenError) Error() string { return e.text }
func (e *hiddenError) Unwrap() error { return e.err }

// hideIn returns err with env hidden in its text, or err itself when its
// text holds none of env's values.
func hideIn(err error, env []string) error {
	if err == nil {
		return nil
	}
	if text := hideEnv(err.Error(), env); text != err.Error() {
		return &hiddenError{text: text, err: err}
	}
	return err
}

// envOf returns the environment of the container id, to hide it in what the
// engine said of it. ok is false when the engine could not say. Then nothing
// it said of the container may be shown.
func (c *dockerClient) envOf(ctx context.Context, id string) (env []string, ok bool) {
	var r container.InspectResponse
	err := c.do(ctx, "inspect "+id, func(ctx context.Context) (err error) {
		r, err = c.api.ContainerInspect(ctx, id)
		return err
	})
	if err != nil {
		return nil, false
	}
	if r.Config != nil {
		env = r.Config.Env
	}
	return env, true
}
