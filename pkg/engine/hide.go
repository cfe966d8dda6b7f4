package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
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
	var pieces []hidden
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok {
			pieces = append(pieces, hiddenForms(v, "[value of "+k+"]")...)
		}
	}
	return hide(text, pieces)
}

// hidden is one piece of text to hide, and what stands in its place.
type hidden struct{ value, label string }

// hiddenForms returns v as it is, as Go quotes it (runc's "PW=S3CRET\x00…"),
// and each run of it between control characters. Each form counts from
// minHidden characters.
func hiddenForms(v, label string) []hidden {
	var out []hidden
	for _, f := range append([]string{v, quoted(v)}, strings.FieldsFunc(v, unicode.IsControl)...) {
		if len(f) >= minHidden {
			out = append(out, hidden{f, label})
		}
	}
	return out
}

// hide replaces each piece in text by its label. The longest goes first, so
// that a value holding another is hidden whole.
func hide(text string, pieces []hidden) string {
	sort.SliceStable(pieces, func(i, j int) bool { return len(pieces[i].value) > len(pieces[j].value) })
	for _, p := range pieces {
		text = strings.ReplaceAll(text, p.value, p.label)
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

// envOf returns the environment and labels of the container id, to hide its
// values in what the engine said of it. ok is false when the engine could not say. Then nothing
// it said of the container may be shown.
func (c *dockerClient) envOf(ctx context.Context, id string) (env []string, labels map[string]string, ok bool) {
	var r container.InspectResponse
	err := c.do(ctx, "inspect "+id, func(ctx context.Context) (err error) {
		r, err = c.api.ContainerInspect(ctx, id)
		return err
	})
	if err != nil {
		return nil, nil, false
	}
	if r.Config != nil {
		env, labels = r.Config.Env, r.Config.Labels
	}
	return env, labels, true
}

// LabelHidden names the host files whose content must never be shown, as a
// JSON object from the path the container sees to the host file. meshctl sets
// it on a container with secrets or configs. A container's log tail may
// print such a file, and meshctl prints and keeps the tail.
const LabelHidden = "io.meshctl.hidden"

// maxHiddenFile bounds what is read of one hidden file. A secret or a
// config is small, and every read is bounded.
const maxHiddenFile = 1 << 20

// hiddenFiles reads the files that labels name (LabelHidden). It returns
// each content by the path the container sees it at. ok is false when one
// cannot be read: the text that may quote it must not be shown then.
func hiddenFiles(labels map[string]string) (files map[string]string, ok bool) {
	raw := labels[LabelHidden]
	if raw == "" {
		return nil, true
	}
	var paths map[string]string
	if err := json.Unmarshal([]byte(raw), &paths); err != nil {
		return nil, false
	}
	files = map[string]string{}
	for target, host := range paths {
		b, err := readBounded(host, maxHiddenFile)
		if err != nil {
			return nil, false
		}
		files[target] = string(b)
	}
	return files, true
}

// readBounded reads at most limit bytes of the regular file path. It never
// blocks: open(2) of a FIFO without a writer would wait for ever, so the
// file is opened non-blocking, and refused unless it is a regular file.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

// hideFiles returns text with the content of each file hidden, as
// "[content of TARGET]". A file is hidden whole, trimmed, and line by line.
// Each piece counts from minHidden characters, as hideEnv's values do.
func hideFiles(text string, files map[string]string) string {
	var pieces []hidden
	for target, content := range files {
		label := "[content of " + target + "]"
		pieces = append(pieces, hiddenForms(strings.TrimSpace(content), label)...)
		for _, line := range strings.Split(content, "\n") {
			pieces = append(pieces, hiddenForms(strings.TrimSpace(line), label)...)
		}
	}
	return hide(text, pieces)
}
