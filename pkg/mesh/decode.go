package mesh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/meshctl/meshctl/pkg/fault"

	"go.yaml.in/yaml/v3"
)

// MaxFileSize is the largest mesh file meshctl reads. A host's file is
// kilobytes. At this size, the worst a file built to be slow costs is well
// under a second (BenchmarkDecodeAdversarial). A larger file is refused
// before any of it is parsed.
const MaxFileSize = 2 << 20

// DecodeError is a mesh file that cannot be used. It names the file, the line
// and the field. It is bad input (exit 2).
type DecodeError struct {
	File   string
	Line   int    // 0 when unknown
	Column int    // 0 when unknown, as for all but a syntax error
	Field  string // dotted path, e.g. modules.store.containers.registry.restart
	Msg    string
	// More are the file's other errors, up to MaxErrors in all. Omitted
	// counts those left out.
	More    []*DecodeError
	Omitted int
}

// MaxErrors is how many of a file's errors are reported at once.
const MaxErrors = 10

func (e *DecodeError) Error() string {
	var b strings.Builder
	b.WriteString(e.one())
	for _, m := range e.More {
		b.WriteString("\n" + m.one())
	}
	if e.Omitted > 0 {
		plural := "s"
		if e.Omitted == 1 {
			plural = ""
		}
		fmt.Fprintf(&b, "\n(and %d more error%s)", e.Omitted, plural)
	}
	return b.String()
}

// errorList returns errs as one DecodeError, the first carrying the others.
// It returns nil when errs is empty.
func errorList(errs []*DecodeError) error {
	if len(errs) == 0 {
		return nil
	}
	first := *errs[0]
	rest := errs[1:]
	if len(rest) > MaxErrors-1 {
		first.Omitted = len(rest) - (MaxErrors - 1)
		rest = rest[:MaxErrors-1]
	}
	first.More = rest
	return &first
}

func (e *DecodeError) one() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Fault says a bad mesh file is bad input.
func (e *DecodeError) Fault() fault.Kind { return fault.BadInput }

// Load reads the mesh file at path, or stdin for "-". See LoadContext.
func Load(path string, stdin io.Reader) (*File, error) {
	return LoadContext(context.Background(), path, stdin)
}

// LoadContext reads the mesh file at path, or stdin for "-". A path must name
// a regular file (see readRegular). stdin may be a pipe, read until ctx is
// done. A pipe that never ends must not keep a signalled command waiting, nor
// a terminal nobody types into. Either input is read up to MaxFileSize and a
// byte more, never all of an endless one.
func LoadContext(ctx context.Context, path string, stdin io.Reader) (*File, error) {
	src, err := ReadSource(ctx, path, stdin)
	if err != nil {
		return nil, err
	}
	return src.Decode()
}

// Source is a mesh file's bytes, read and not yet decoded.
type Source struct {
	Name string // the file's name in errors, <stdin> for stdin
	Data []byte
	// Dir is the absolute directory that relative env-file, secret and
	// config paths start from. It is "" when it cannot be known.
	Dir string
}

// ReadSource reads the mesh file at path, or stdin for "-", as LoadContext
// does. It decodes nothing.
func ReadSource(ctx context.Context, path string, stdin io.Reader) (*Source, error) {
	src := &Source{Name: path}
	var err error
	if path == "-" {
		src.Name = "<stdin>"
		if src.Data, err = readStdin(ctx, stdin); ctx.Err() != nil {
			return nil, ctx.Err()
		}
	} else {
		src.Data, err = readRegular(path, MaxFileSize)
	}
	if err != nil {
		msg := err.Error()
		if nr := (*notRegularError)(nil); errors.As(err, &nr) {
			msg += `; to read a pipe, give "-f -" and redirect it`
		}
		return nil, &DecodeError{File: src.Name, Msg: msg}
	}
	// env-files, secrets and configs are read at apply time, and by a
	// window's close from the applied state. So their paths must not depend
	// on the working directory.
	dir := "."
	if path != "-" {
		dir = filepath.Dir(path)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		src.Dir = abs
	}
	return src, nil
}

// Decode decodes and validates the source (Decode), and makes its file
// paths absolute from its directory.
func (src *Source) Decode() (*File, error) {
	f, err := Decode(src.Name, src.Data)
	if err != nil {
		return nil, err
	}
	if src.Dir != "" {
		f.absEnvFiles(src.Dir)
		f.absFileMounts(src.Dir)
	}
	return f, nil
}

// readStdin reads stdin up to MaxFileSize and a byte more, or until ctx is
// done. Then the read goes on in the background and ends with the process.
func readStdin(ctx context.Context, stdin io.Reader) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := io.ReadAll(io.LimitReader(stdin, MaxFileSize+1))
		if err != nil {
			err = fmt.Errorf("cannot read: %w", err)
		}
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Decode strictly decodes and validates a mesh file, YAML or JSON. Its work
// is linear in the size of the file. A *DecodeError reports an unknown field,
// a wrong type, a duplicate key or a bad name. It also reports an unknown
// container in while-stopped, or a file over MaxFileSize. It holds every
// mistake of the file at once, up to MaxErrors. A syntax error comes alone,
// since a file that does not parse has no values to check.
func Decode(name string, data []byte) (*File, error) {
	if len(data) > MaxFileSize {
		return nil, &DecodeError{File: name, Msg: fmt.Sprintf("is larger than %d MiB", MaxFileSize>>20)}
	}
	t := &tree{data: data}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f File
	doc := document{file: &f, tree: t}
	if err := dec.Decode(&doc); err != nil || len(doc.errs) > 0 {
		return nil, decodeFailure(name, t, &f, doc.errs, err)
	}
	if f.Modules == nil {
		// null, or a document without modules. The tree tells which.
		if err := t.check(name); err != nil {
			return nil, err
		}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		e := &DecodeError{File: name, Line: extra.Line, Msg: "holds more than one YAML document"}
		if err != nil {
			if m := lineRE().FindStringSubmatch(err.Error()); m != nil {
				e.Line, _ = strconv.Atoi(m[1])
			}
		}
		return nil, e
	}
	if err := validate(name, t, &f, nil); err != nil {
		return nil, err
	}
	return &f, nil
}

// decodeFailure is the error of a file the decoder refused. errs are the
// reshaping's errors, and err is the decoder's. A type error leaves a zero
// where the value was, and the decode goes on. So the file's other mistakes
// are reported with it, not on the next pass. The validator is told which
// values did not decode, and takes none of those zeros for a mistake.
func decodeFailure(name string, t *tree, f *File, errs []string, err error) error {
	var te *yaml.TypeError
	if err != nil && !errors.As(err, &te) {
		// A syntax error, or no document. The decoder never had a tree,
		// and the check parses the file again to tell which.
		if err := t.check(name); err != nil {
			return err
		}
		return yamlError1(name, t.node(), err.Error())
	}
	if te != nil {
		errs = append(errs, te.Errors...)
	}
	if e := composeFile(name, t.node()); e != nil {
		return e
	}
	decodeErr, lost := yamlErrors(name, t.node(), errs)
	if len(errs) > MaxErrors || slices.ContainsFunc(decodeErr.flat(), wholeFile) {
		// The errors shown are all yaml's. Or one is about the whole file,
		// and no value of it was decoded.
		return decodeErr
	}
	return withValidation(decodeErr, validate(name, t, f, lost))
}

// composeFile is the error for a Compose file given as a mesh file, or nil
// for another file. Its top-level map has services: and no modules:. Each of
// its keys would be an unknown field, and what helps is the command that
// converts it.
func composeFile(name string, root *yaml.Node) *DecodeError {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	if n.Kind != yaml.MappingNode {
		return nil
	}
	var services *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "modules":
			return nil
		case "services":
			services = n.Content[i]
		}
	}
	if services == nil {
		return nil
	}
	file := name
	if name == "<stdin>" {
		file = "compose.yaml"
	} else if strings.ContainsAny(file, " \t'\"$`\\!*?[]{}()<>|&;#~") {
		file = "'" + strings.ReplaceAll(file, "'", `'\''`) + "'"
	}
	return &DecodeError{File: name, Line: services.Line, Field: "services", Msg: "this is a Compose file, not a mesh file: " +
		"convert it with meshctl convert -f " + file + " > mesh.yaml, then apply mesh.yaml"}
}

// wholeFile reports whether e names no line or no field. Then no value of
// the file can be trusted.
func wholeFile(e *DecodeError) bool { return e.Line == 0 || e.Field == "" }

// validate checks the decoded file f (validator). lost are the paths of the
// values that did not decode. It returns nil when f holds.
func validate(name string, t *tree, f *File, lost []string) error {
	v := validator{file: name, tree: t, lost: lost}
	v.file_(f)
	return v.result()
}

// withValidation adds to a file's decode errors, yamlErr, its validation
// errors, valErr. valErr is nil when there are none. The result is in line
// order, MaxErrors in all. A validation error on the line or field of a
// decode error, or inside that field, is left out. It would only repeat the
// decode error.
func withValidation(yamlErr, valErr error) error {
	var ye, ve *DecodeError
	if !errors.As(yamlErr, &ye) || !errors.As(valErr, &ve) {
		return yamlErr
	}
	decoded := ye.flat()
	all := decoded
	omitted := ye.Omitted + ve.Omitted
	for _, v := range ve.flat() {
		if !slices.ContainsFunc(decoded, func(y *DecodeError) bool { return y.covers(v) }) {
			all = append(all, v)
		}
	}
	slices.SortStableFunc(all, func(a, b *DecodeError) int { return a.Line - b.Line })
	e := errorList(all).(*DecodeError)
	e.Omitted += omitted
	return e
}

// flat is e and its More, each alone.
func (e *DecodeError) flat() []*DecodeError {
	out := []*DecodeError{{File: e.File, Line: e.Line, Field: e.Field, Msg: e.Msg}}
	for _, m := range e.More {
		out = append(out, &DecodeError{File: m.File, Line: m.Line, Field: m.Field, Msg: m.Msg})
	}
	return out
}

// covers reports whether e, a decode failure, is about o's field or one
// around it. That is, o is inside what failed to decode. It also covers o
// when both are on one line.
func (e *DecodeError) covers(o *DecodeError) bool {
	if e.Line > 0 && e.Line == o.Line {
		return true
	}
	if e.Field == "" || o.Field == "" {
		return false
	}
	return e.Field == o.Field || strings.HasPrefix(o.Field, e.Field+".")
}
