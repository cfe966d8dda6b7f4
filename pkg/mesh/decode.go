package mesh

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest mesh file meshctl reads.
const MaxFileSize = 4 << 20

// DecodeError is a mesh file that cannot be used: it names the file, the
// line and the field. It is bad input (exit 2).
type DecodeError struct {
	File  string
	Line  int    // 0 when unknown
	Field string // dotted path, e.g. modules.store.containers.registry.restart
	Msg   string
}

func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// ExitCode maps a bad mesh file to exit status 2.
func (e *DecodeError) ExitCode() int { return 2 }

// Load reads the mesh file at path; "-" reads stdin.
func Load(path string, stdin io.Reader) (*File, error) {
	name := path
	var r io.Reader
	if path == "-" {
		name, r = "<stdin>", stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, &DecodeError{File: path, Msg: fmt.Sprintf("cannot open: %v", errors.Unwrap(err))}
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, &DecodeError{File: name, Msg: fmt.Sprintf("cannot read: %v", err)}
	}
	f, err := Decode(name, data)
	if err != nil {
		return nil, err
	}
	// env-files are read at apply time, and by a window's close from the
	// applied state: make them independent of the working directory.
	dir := "."
	if path != "-" {
		dir = filepath.Dir(path)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		f.absEnvFiles(abs)
	}
	return f, nil
}

// Decode strictly decodes and validates a mesh file, YAML or JSON: an unknown
// field, a wrong type, a duplicate key, a bad name, an unknown container in
// while-stopped or a file over 4 MiB is a *DecodeError.
func Decode(name string, data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, &DecodeError{File: name, Msg: fmt.Sprintf("is larger than %d MiB", MaxFileSize>>20)}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlError(name, &root, err)
	}
	if root.Kind == 0 || len(root.Content) == 0 || root.Content[0].Kind == yaml.ScalarNode && root.Content[0].Tag == "!!null" {
		return nil, &DecodeError{File: name, Msg: `is empty; a mesh file has a "modules:" map`}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, yamlError(name, &root, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		e := &DecodeError{File: name, Line: extra.Line, Msg: "holds more than one YAML document"}
		if err != nil {
			if m := lineRE.FindStringSubmatch(err.Error()); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
			}
		}
		return nil, e
	}
	v := validator{file: name, root: &root}
	v.file_(&f)
	if v.err != nil {
		return nil, v.err
	}
	return &f, nil
}

var lineRE = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
var unknownFieldRE = regexp.MustCompile(`^field (.+) not found in type \S+$`)
var duplicateKeyRE = regexp.MustCompile(`^mapping key (".*") already defined at line \d+$`)
var typeErrorRE = regexp.MustCompile(`^cannot unmarshal (!!\w+)`)

// parserProblems are the syntax errors of yaml.v3's parser (not its
// scanner). yaml.v3 writes their line 0-based, and leaves it out on the
// first line.
var parserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"found undefined tag handle":             true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found incompatible YAML document":       true,
	"found duplicate %TAG directive":         true,
}

// yamlError turns the first of yaml.v3's errors into a DecodeError with the
// file, line and field path.
func yamlError(name string, root *yaml.Node, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	e := &DecodeError{File: name, Msg: strings.TrimPrefix(msg, "yaml: ")}
	if parserProblems[e.Msg] {
		return &DecodeError{File: name, Line: 1, Msg: e.Msg}
	}
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
		if parserProblems[e.Msg] {
			e.Line++
			return e // the node tree is not there to name the field
		}
		// The message names the key or the kind of value when there is
		// one: prefer it to other keys on the same line (a JSON file may be
		// a single line).
		var key, tag string
		if u := unknownFieldRE.FindStringSubmatch(e.Msg); u != nil {
			key = u[1]
			e.Msg = fmt.Sprintf("unknown field %q", u[1])
		} else if u := duplicateKeyRE.FindStringSubmatch(e.Msg); u != nil {
			key, _ = strconv.Unquote(u[1])
		} else if u := typeErrorRE.FindStringSubmatch(e.Msg); u != nil {
			tag = u[1]
		}
		e.Field = pathAt(root, e.Line, key, tag)
		if e.Field == "" && (key != "" || tag != "") {
			e.Field = pathAt(root, e.Line, "", "")
		}
		// Go type names, not the value quoted before them, lose "mesh.".
		if i := strings.LastIndex(e.Msg, " into "); i >= 0 {
			e.Msg = e.Msg[:i] + strings.ReplaceAll(e.Msg[i:], "mesh.", "")
		}
	}
	return e
}

// pathAt returns the dotted path of the deepest mapping key or value that
// starts on line, or "" if none does. A non-empty key restricts the search to
// mapping keys of that name; a non-empty tag, to values of that tag.
func pathAt(n *yaml.Node, line int, key, tag string) string {
	var best string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := join(path, k.Value)
				var match bool
				switch {
				case key != "":
					match = k.Line == line && k.Value == key
				case tag != "":
					// A type error names the line of the value, which for
					// a block list or map is after the key's.
					match = v.Line == line && v.ShortTag() == tag
				default:
					match = k.Line == line || v.Line == line && (v.Kind == yaml.SequenceNode || v.Kind == yaml.MappingNode)
				}
				if match {
					best = p
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := fmt.Sprintf("%s[%d]", path, i)
				if c.Line == line && key == "" && (tag == "" && best == "" || tag != "" && c.ShortTag() == tag) {
					best = p
				}
				walk(c, p)
			}
		}
	}
	walk(n, "")
	return best
}

// lineOf returns the line of the key at path (or of the value, for a
// sequence index written "[i]"), 0 if it is not in the file.
func lineOf(n *yaml.Node, path ...string) int {
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, p := range path {
		found := false
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
		} else if n.Kind == yaml.SequenceNode {
			if i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "["), "]")); err == nil && i < len(n.Content) {
				n = n.Content[i]
				line = n.Line
				found = true
			}
		}
		if !found {
			return line
		}
	}
	return line
}

// index is the path element of a sequence's i-th item.
func index(i int) string { return fmt.Sprintf("[%d]", i) }

// fieldPath writes path as "modules.m.containers.c.volumes[1]".
func fieldPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && !strings.HasPrefix(p, "[") {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
