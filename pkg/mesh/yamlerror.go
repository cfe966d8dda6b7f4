package mesh

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/meshctl/meshctl/pkg/lazyre"
)

var lineRE = lazyre.New(`^(?:yaml: )?line (\d+): (.*)$`)
var columnRE = lazyre.New(`^column (\d+): (.*)$`)
var unknownFieldRE = lazyre.New(`^field (.+) not found in type \S+$`)
var duplicateKeyRE = lazyre.New(`^mapping key (".*") already defined at line \d+$`)
var typeErrorRE = lazyre.New(`^cannot unmarshal (!!\w+)`)

// parserProblems are the syntax errors of yaml.v3's parser, not its scanner.
// yaml.v3 writes their line 0-based, and leaves it out on the first line.
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

// yamlErrors turns yaml's errors, msgs, into one DecodeError that lists them
// in the file's order. These are the type errors, unknown fields and
// duplicate keys of the file. Each error gets the file, line and field path.
// Only the first MaxErrors are placed in the tree, and the others are
// counted. lost are the paths of the values the placed errors left
// undecoded.
func yamlErrors(name string, root *yaml.Node, msgs []string) (e *DecodeError, lost []string) {
	type numbered struct {
		line int
		msg  string
	}
	sorted := make([]numbered, len(msgs))
	for i, msg := range msgs {
		sorted[i] = numbered{lineNumber(msg), msg}
	}
	slices.SortStableFunc(sorted, func(a, b numbered) int { return a.line - b.line })
	var errs []*DecodeError
	for _, m := range sorted[:min(len(sorted), MaxErrors)] {
		one := yamlError1(name, root, m.msg)
		errs = append(errs, one)
		lost = append(lost, lostPath(one, m.msg))
	}
	e = errorList(errs).(*DecodeError)
	e.Omitted = len(sorted) - len(errs)
	return e, lost
}

// lostPath is the path of the value that yaml's error msg, placed as e,
// left undecoded. A duplicate key fails the whole map that holds it. A
// misspelt field is the field meant, which the file gave no value. Otherwise
// it is the field named.
func lostPath(e *DecodeError, msg string) string {
	m := lineRE().FindStringSubmatch(msg)
	if m == nil {
		return e.Field
	}
	if duplicateKeyRE().MatchString(m[2]) {
		if i := strings.LastIndexAny(e.Field, ".["); i >= 0 {
			return e.Field[:i]
		}
		return ""
	}
	if u := unknownFieldRE().FindStringSubmatch(m[2]); u != nil && strings.HasSuffix(e.Field, "."+u[1]) {
		if meant := Suggest(u[1], knownFields(e.Field)); meant != "" {
			return strings.TrimSuffix(e.Field, u[1]) + meant
		}
	}
	return e.Field
}

// lineNumber is the line a yaml error names, 0 if none.
func lineNumber(msg string) int {
	rest, ok := strings.CutPrefix(msg, "line ")
	if !ok {
		return 0
	}
	digits, _, _ := strings.Cut(rest, ":")
	n, _ := strconv.Atoi(digits)
	return n
}

// yamlError1 turns one of yaml's messages into a DecodeError in the file's
// words.
func yamlError1(name string, root *yaml.Node, msg string) *DecodeError {
	e := &DecodeError{File: name, Msg: strings.TrimPrefix(msg, "yaml: ")}
	if parserProblems[e.Msg] {
		return &DecodeError{File: name, Line: 1, Msg: e.Msg}
	}
	m := lineRE().FindStringSubmatch(msg)
	if m == nil {
		return e
	}
	e.Line, _ = strconv.Atoi(m[1])
	e.Msg = m[2]
	if parserProblems[e.Msg] {
		e.Line++
		return e // the node tree is not there to name the field
	}
	if c := columnRE().FindStringSubmatch(e.Msg); c != nil {
		// meshctl's own errors name the node's column. The field is the one
		// written there, whatever else is on the line.
		col, _ := strconv.Atoi(c[1])
		e.Msg = c[2]
		e.Field = pathAtColumn(root, e.Line, col)
	} else {
		e.Field = fieldOf(root, e.Line, e.Msg)
	}
	if u := unknownFieldRE().FindStringSubmatch(e.Msg); u != nil {
		e.Msg = fmt.Sprintf("unknown field %q", u[1]) + fieldHint(u[1], knownFields(e.Field))
		if isChangeField(e.Field) {
			e.Msg = fmt.Sprintf("unknown field %q", u[1]) + changeHint(u[1])
		}
	} else if typeErrorRE().MatchString(e.Msg) {
		e.Msg = typeMessage(e.Field, e.Msg)
	}
	return e
}

// fieldOf returns the path of the field that a yaml error at line is about.
// The message may name the key or the kind of value. That one is preferred to
// other keys on the same line, since a JSON file may be a single line.
func fieldOf(root *yaml.Node, line int, msg string) string {
	var key, tag string
	if u := unknownFieldRE().FindStringSubmatch(msg); u != nil {
		key = u[1]
	} else if u := duplicateKeyRE().FindStringSubmatch(msg); u != nil {
		key, _ = strconv.Unquote(u[1])
	} else if u := typeErrorRE().FindStringSubmatch(msg); u != nil {
		tag = u[1]
	}
	field := pathAt(root, line, key, tag)
	if field == "" && (key != "" || tag != "") {
		field = pathAt(root, line, "", "")
	}
	return field
}

// fieldHint is what follows `unknown field "key"`. It is the field meant, or
// the fields there are.
func fieldHint(key string, known []string) string {
	if why, ok := noField[strings.ReplaceAll(key, "_", "-")]; ok {
		return "; " + why
	}
	if len(known) == 0 {
		return ""
	}
	if s := Suggest(key, known); s != "" {
		return fmt.Sprintf("; did you mean %q?", s)
	}
	return " (fields here: " + strings.Join(known, ", ") + ")"
}

// isChangeField reports whether path is a field of a while-changed change.
func isChangeField(path string) bool {
	parts := strings.Split(path, ".")
	return len(parts) == 7 && parts[2] == "steps" && parts[4] == "while-changed"
}

// changeHint is what follows `unknown field "key"` in a while-changed
// change. It says why the field is not there, and what is.
func changeHint(key string) string {
	known := yamlFields(reflect.TypeFor[Change]())
	hint := "; a window changes how a container runs, not what it is: while-changed takes " +
		strings.Join(known, ", ")
	if s := Suggest(key, known); s != "" {
		hint += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return hint
}

// noField says why a container has no field of Compose's that a user may
// write, and what to do instead.
var noField = map[string]string{
	"container-name": "meshctl names every container MODULE.NAME (the key of its module and of the container " +
		"under containers:), which is how it finds its own: remove it, and reach the container by that name",
	"platform": "meshctl runs the image built for the host's platform: remove it, or name an image of that " +
		"platform (pinned by digest)",
	"runtime": "meshctl runs containers with the engine's default runtime: remove it, or make that runtime " +
		"the engine's default (dockerd --default-runtime)",
}

// knownFields returns the fields of the map that holds the key at path.
func knownFields(path string) []string {
	parts := strings.Split(path, ".")
	var t reflect.Type
	switch {
	case len(parts) == 1:
		t = reflect.TypeFor[File]()
	case len(parts) == 3 && parts[0] == "modules":
		t = reflect.TypeFor[Module]()
	case len(parts) == 5 && parts[2] == "containers":
		t = reflect.TypeFor[Container]()
	case len(parts) == 5 && parts[2] == "steps":
		t = reflect.TypeFor[Step]()
	case isChangeField(path):
		t = reflect.TypeFor[Change]()
	case len(parts) == 6 && parts[2] == "steps" && parts[4] == "run":
		t = reflect.TypeFor[RunStep]()
	default:
		return nil
	}
	return yamlFields(t)
}

// yamlFields returns the YAML names of t's fields, those of inlined
// structs included.
func yamlFields(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case opts == "inline" || strings.Contains(opts, "inline,") || strings.HasSuffix(opts, ",inline"):
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			out = append(out, yamlFields(ft)...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	return out
}

var typeErrorPartsRE = lazyre.New("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")

// typeMessage says a type error in the file's words. It says what the field
// takes, with an example, and what it found. It never shows yaml's tags
// (!!str) or Go's types ([]string).
func typeMessage(field, msg string) string {
	m := typeErrorPartsRE().FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	found := map[string]string{"str": "a string", "seq": "a list", "map": "a map", "int": "a number",
		"float": "a number", "bool": "true or false", "null": "nothing", "timestamp": "a date"}[m[1]]
	if found == "" {
		found = "a " + m[1]
	}
	// What was found is quoted, but never for a map of strings. env and
	// logging options hold secrets ("splunk-token=…").
	if m[2] != "" && (m[1] == "str" || m[1] == "int" || m[1] == "float" || m[1] == "bool") && m[3] != "map[string]string" {
		found += fmt.Sprintf(" (%s)", m[2])
	}
	return "want " + wantedFor(field, strings.NewReplacer("*", "", "mesh.", "").Replace(m[3])) + ", not " + found
}

// wantedFor describes what a field of Go type goType takes, with an example
// fitting the field.
func wantedFor(field, goType string) string {
	last := field
	if i := strings.LastIndex(field, "."); i >= 0 {
		last = field[i+1:]
	}
	switch goType {
	case "[]string":
		example := map[string]string{
			"command": `[sh, -c, "…"]`, "entrypoint": "[/bin/registry]", "exec": "[/usr/local/bin/gc.sh, --all]",
			"volumes": `["data:/var/lib/data", "/srv/conf:/etc/conf:ro"]`, "ports": `["127.0.0.1:5000:5000"]`,
			"while-stopped": "[registry]", "volumes-from": "[registry]",
		}[last]
		if example == "" {
			example = "[a, b]"
		}
		return "a list of strings, like " + example
	case "map[string]string":
		if last == "labels" {
			return "a map of strings, like {team: infra}"
		}
		return "a map of strings, like {KEY: value}"
	case "string":
		return "a string"
	case "map[string]Module":
		return "a map of modules by name, like {store: {containers: …}}"
	case "map[string]Container":
		return "a map of containers by name, like {registry: {image: …}}"
	case "map[string]Step":
		return "a map of steps by name, like {garbage-collect: {while-stopped: […], run: …}}"
	case "File":
		return `a map with a "modules:" key`
	case "Module":
		return "a module: a map with containers: and steps:"
	case "Container":
		return "a container: a map like {image: …, command: […]}"
	case "Step":
		return "a step: a map with while-stopped: or while-changed:, timeout:, stall-after: and run: or exec:"
	case "map[string]Change":
		return `a map of containers to their change, like {registry: {env: {KEY: value}}}`
	case "Change":
		return "a change: a map with env:, command:, entrypoint: or healthcheck:"
	case "RunStep":
		return "a map like {image: …, command: […]}"
	case "a duration":
		return "a duration, like 30m or 2h"
	case "EnvVars":
		return `a map like {KEY: value} or a list like ["KEY=value"]`
	case "FileMount":
		return "a map like {name: db_password, file: db_password.txt} (the file on the host itself)"
	case "Ulimit":
		return "a number, or a map like {soft: 1024, hard: 4096}"
	case "map[string]Ulimit":
		return "a map of limits, like {nofile: {soft: 1024, hard: 4096}}"
	case "[]FileMount":
		return "a list like [{name: db_password, file: db_password.txt}]"
	case "map[string]Network":
		return "a map of networks by name, like {back: {internal: true}}"
	case "Network":
		return "a network: a map like {internal: true} or {external: NAME}, or nothing"
	case "Healthcheck":
		return "a map like {test: [CMD, …], interval: 30s}"
	case "Logging":
		return "a map like {driver: json-file, options: {max-size: 10m}}"
	case "bool":
		return "true or false"
	case "int", "int64":
		return "a whole number"
	case "float64":
		return "a number, like 0.5 or 2"
	}
	return goType
}

// pathAt returns the dotted path of the deepest mapping key or value that
// starts on line, or "" if none does. A non-empty key restricts the search to
// mapping keys of that name. A non-empty tag restricts it to values of that
// tag.
func pathAt(n *yaml.Node, line int, key, tag string) string {
	var best string
	var w pathWalker
	w.walk(n, line, func(k, v *yaml.Node) {
		var match bool
		switch {
		case k == nil: // a sequence item
			match = v.Line == line && key == "" && (tag == "" && best == "" || tag != "" && v.ShortTag() == tag)
		case key != "":
			match = k.Line == line && k.Value == key
		case tag != "":
			// A type error names the line of the value, which for a
			// block list or map is after the key's.
			match = v.Line == line && v.ShortTag() == tag
		default:
			match = k.Line == line || v.Line == line && (v.Kind == yaml.SequenceNode || v.Kind == yaml.MappingNode)
		}
		if match {
			best = w.String()
		}
	})
	return best
}

// pathAtColumn returns the dotted path of the node written at line and
// column. That is the key of a mapping value, or the index of a sequence
// item. A key there is named by itself.
func pathAtColumn(n *yaml.Node, line, col int) string {
	at := func(n *yaml.Node) bool { return n != nil && n.Line == line && n.Column == col }
	var best string
	var w pathWalker
	w.walk(n, line, func(k, v *yaml.Node) {
		if at(k) || at(v) {
			best = w.String()
		}
	})
	return best
}

// pathWalker walks a node tree in document order. It keeps the path to the
// node it visits as elements, written out only when asked for. So the errors
// of a file of MaxNodes values are placed without a string per node.
type pathWalker struct {
	path []pathElem
}

// pathElem is a mapping key, or a sequence index when key is nil.
type pathElem struct {
	key *yaml.Node
	i   int
}

// walk calls visit for every mapping entry (k, v) and sequence item (nil, v)
// under n, in document order. w's path is then at that entry. Nothing after
// line is visited. The entries of a node come in the file's order. So the
// first that starts after line ends the node's walk.
func (w *pathWalker) walk(n *yaml.Node, line int, visit func(k, v *yaml.Node)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			w.walk(c, line, visit)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Line > line {
				return
			}
			w.path = append(w.path, pathElem{key: k})
			visit(k, v)
			w.walk(v, line, visit)
			w.path = w.path[:len(w.path)-1]
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			if c.Line > line {
				return
			}
			w.path = append(w.path, pathElem{i: i})
			visit(nil, c)
			w.walk(c, line, visit)
			w.path = w.path[:len(w.path)-1]
		}
	}
}

// String writes the path as "modules.m.containers.c.volumes[1]".
func (w *pathWalker) String() string {
	var b strings.Builder
	for _, e := range w.path {
		if e.key == nil {
			fmt.Fprintf(&b, "[%d]", e.i)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(e.key.Value)
	}
	return b.String()
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
