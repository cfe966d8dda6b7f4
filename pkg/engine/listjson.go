package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The engine's list is parsed here by hand, in one pass. encoding/json
// scanned each byte twice with its state machine: 12 ms of CPU at 1000
// containers, a third of a no-op apply's. The fields listed reads are
// parsed strictly. The others are skipped, their structure still checked.
// A string with an escape or a non-ASCII byte goes to encoding/json, so
// every string reads exactly as there.

// listParser reads a JSON document from r through a buffer. The value it
// parses stays whole in buf from mark on.
type listParser struct {
	r    io.Reader
	buf  []byte
	pos  int
	mark int // the start of the value being parsed; fill keeps it
	base int // the offset in the input of buf[0]
	err  error
	key  []byte // the last member's name, unquoted
	// names holds each label name read, and last each label's and field's
	// last value, by name. Containers of one apply share most of them (its
	// scope, module, role, image, state), and each is then one string, not
	// one per container: a fifth of the list's allocations at 1000.
	names map[string]string
	last  map[string]string
}

// listSyntaxError is a parse error. Its text names the offset.
type listSyntaxError struct {
	off int
	msg string
}

func (e *listSyntaxError) Error() string {
	return fmt.Sprintf("the engine's list is not valid JSON near byte %d: %s", e.off, e.msg)
}

func (p *listParser) fail(msg string) error {
	return &listSyntaxError{off: p.base + p.pos, msg: msg}
}

// fill reads more of the answer. It moves buf[mark:] to the front first,
// and grows buf only when that is full. It reports false at the end of
// the input, or on a read error (p.err).
func (p *listParser) fill() bool {
	if p.err != nil {
		return false
	}
	if p.mark > 0 {
		n := copy(p.buf, p.buf[p.mark:])
		p.base += p.mark
		p.pos -= p.mark
		p.mark = 0
		p.buf = p.buf[:n]
	}
	if len(p.buf) == cap(p.buf) {
		p.buf = append(p.buf, make([]byte, len(p.buf)+4096)...)[:len(p.buf)]
	}
	n, err := p.r.Read(p.buf[len(p.buf):cap(p.buf)])
	p.buf = p.buf[:len(p.buf)+n]
	if err != nil {
		p.err = err
	}
	return n > 0 || err == nil
}

// readErr is the error for input that ended at p.pos.
func (p *listParser) readErr() error {
	if p.err != nil && p.err != io.EOF {
		return p.err
	}
	return io.ErrUnexpectedEOF
}

// next skips white space and returns the next byte, not consuming it.
func (p *listParser) next() (byte, error) {
	for {
		for p.pos < len(p.buf) {
			switch c := p.buf[p.pos]; c {
			case ' ', '\t', '\n', '\r':
				p.pos++
			default:
				return c, nil
			}
		}
		p.mark = p.pos
		if !p.fill() {
			return 0, p.readErr()
		}
	}
}

// expect consumes the byte c, after white space.
func (p *listParser) expect(c byte) error {
	b, err := p.next()
	if err != nil {
		return err
	}
	if b != c {
		return p.fail(fmt.Sprintf("want %q, not %q", c, b))
	}
	p.pos++
	return nil
}

// stringEnd scans the string that starts at p.pos (a quote). It returns
// the offset past its closing quote from mark, and whether it needs
// encoding/json to read it (an escape, or a byte that is not ASCII).
func (p *listParser) stringEnd() (end int, slow bool, err error) {
	p.mark = p.pos
	i := p.pos + 1
	for {
		for i < len(p.buf) {
			switch c := p.buf[i]; {
			case c == '"':
				return i + 1 - p.mark, slow, nil
			case c == '\\':
				slow = true
				i += 2 // the escaped byte is never the end; a \u's digits are checked later
				continue
			case c < 0x20:
				p.pos = i
				return 0, false, p.fail("control character in a string")
			case c >= 0x80:
				slow = true
			}
			i++
		}
		off := i - p.mark
		if !p.fill() {
			return 0, false, p.readErr()
		}
		i = p.mark + off
	}
}

// rawString parses a string and returns it as it is in the input, quotes
// and all. It stays valid until the next fill. slow is as for stringEnd.
func (p *listParser) rawString() (raw []byte, slow bool, err error) {
	if c, err := p.next(); err != nil {
		return nil, false, err
	} else if c != '"' {
		return nil, false, p.fail(fmt.Sprintf("want a string, not %q", c))
	}
	end, slow, err := p.stringEnd()
	if err != nil {
		return nil, false, err
	}
	raw = p.buf[p.mark : p.mark+end]
	p.pos = p.mark + end
	return raw, slow, nil
}

// str parses a string of its own, such as an ID or a name.
func (p *listParser) str() (string, error) { return p.shared("") }

// shared parses a string, and returns the last one read as name's value
// when it is the same (listParser.last). An empty name shares nothing.
func (p *listParser) shared(name string) (string, error) {
	raw, slow, err := p.rawString()
	if err != nil {
		return "", err
	}
	if slow {
		return unquote(raw)
	}
	v := raw[1 : len(raw)-1]
	if name == "" {
		return string(v), nil
	}
	if s, ok := p.last[name]; ok && s == string(v) {
		return s, nil
	}
	s := string(v)
	p.last[name] = s
	return s, nil
}

// name returns key as a string, one for each name.
func (p *listParser) name(key []byte) string {
	if s, ok := p.names[string(key)]; ok {
		return s
	}
	s := string(key)
	p.names[s] = s
	return s
}

// unquote reads the string raw (quotes and all) has escapes in, or bytes
// that are not ASCII. An escaped ASCII string is read here: every spec
// label is one (its quotes are escaped), and encoding/json took a third of
// the list's parse at 1000 containers reading them. The rest goes to
// encoding/json, for its rules on bad UTF-8, lone surrogates and bad
// escapes.
func unquote(raw []byte) (string, error) {
	if s, ok := unquoteASCII(raw); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// unquoteASCII is unquote of a string of ASCII bytes whose escapes are
// valid and none of a surrogate (\ud800 to \udfff). ok is false for any
// other, which it leaves to encoding/json.
func unquoteASCII(raw []byte) (s string, ok bool) {
	in := raw[1 : len(raw)-1]
	var out strings.Builder
	out.Grow(len(in))
	for len(in) > 0 {
		run := 0
		for run < len(in) && in[run] != '\\' {
			if in[run] >= utf8.RuneSelf {
				return "", false
			}
			run++
		}
		out.Write(in[:run])
		if in = in[run:]; len(in) == 0 {
			break
		}
		if len(in) < 2 {
			return "", false
		}
		n := 2 // the backslash and the byte it escapes
		switch c := in[1]; c {
		case '"', '\\', '/':
			out.WriteByte(c)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := hex4(in[2:])
			if !ok || utf16.IsSurrogate(r) {
				return "", false
			}
			out.WriteRune(r)
			n += 4
		default:
			return "", false
		}
		in = in[n:]
	}
	return out.String(), true
}

// hex4 reads the four hex digits b starts with.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// skipString parses a string and drops it. It checks its escapes.
func (p *listParser) skipString() error {
	raw, slow, err := p.rawString()
	if err == nil && slow && !json.Valid(raw) {
		return p.fail("bad string " + strconv.Quote(string(raw)))
	}
	return err
}

// null consumes a null, if that is what comes next.
func (p *listParser) null() (bool, error) {
	c, err := p.next()
	if err != nil || c != 'n' {
		return false, err
	}
	return true, p.literal("null")
}

// literal consumes the literal word.
func (p *listParser) literal(word string) error {
	p.mark = p.pos
	for len(p.buf)-p.pos < len(word) {
		if !p.fill() {
			return p.readErr()
		}
	}
	if string(p.buf[p.pos:p.pos+len(word)]) != word {
		return p.fail("bad literal")
	}
	p.pos += len(word)
	return nil
}

// number consumes a number and returns its text.
func (p *listParser) number() ([]byte, error) {
	p.mark = p.pos
	i := p.pos
	for {
		for i < len(p.buf) && isNumberByte(p.buf[i]) {
			i++
		}
		if i < len(p.buf) || p.err != nil {
			break
		}
		off := i - p.mark
		if !p.fill() {
			break
		}
		i = p.mark + off
	}
	if i == p.mark {
		return nil, p.fail("want a value")
	}
	num := p.buf[p.mark:i]
	p.pos = i
	if !json.Valid(num) {
		return nil, p.fail("bad number " + strconv.Quote(string(num)))
	}
	return num, nil
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// each parses an object or an array (open is '{' or '['), calling f at each
// member. For an object, key is the member's name. It is valid until f
// parses another object.
func (p *listParser) each(open byte, f func(key []byte) error) error {
	if err := p.expect(open); err != nil {
		return err
	}
	closing := byte(']')
	if open == '{' {
		closing = '}'
	}
	if c, err := p.next(); err != nil {
		return err
	} else if c == closing {
		p.pos++
		return nil
	}
	for {
		var key []byte
		if open == '{' {
			raw, slow, err := p.rawString()
			if err != nil {
				return err
			}
			if slow {
				k, err := unquote(raw)
				if err != nil {
					return err
				}
				p.key = append(p.key[:0], k...)
			} else {
				p.key = append(p.key[:0], raw[1:len(raw)-1]...)
			}
			key = p.key
			if err := p.expect(':'); err != nil {
				return err
			}
		}
		if err := f(key); err != nil {
			return err
		}
		c, err := p.next()
		if err != nil {
			return err
		}
		p.pos++
		switch c {
		case ',':
		case closing:
			return nil
		default:
			p.pos--
			return p.fail(fmt.Sprintf("want ',' or %q, not %q", closing, c))
		}
	}
}

// skip parses a value and drops it.
func (p *listParser) skip() error {
	c, err := p.next()
	if err != nil {
		return err
	}
	switch c {
	case '"':
		return p.skipString()
	case '{', '[':
		return p.each(c, func([]byte) error { return p.skip() })
	case 't':
		return p.literal("true")
	case 'f':
		return p.literal("false")
	case 'n':
		return p.literal("null")
	}
	_, err = p.number()
	return err
}

// stringList parses an array of strings, or null.
func (p *listParser) stringList() ([]string, error) {
	if isNull, err := p.null(); isNull || err != nil {
		return nil, err
	}
	out := []string{}
	err := p.each('[', func([]byte) error {
		s, err := p.str()
		out = append(out, s)
		return err
	})
	return out, err
}

// labels parses an object of strings into m, or null.
func (p *listParser) labels(m *map[string]string) error {
	if isNull, err := p.null(); isNull || err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]string{}
	}
	return p.each('{', func(key []byte) error {
		k := p.name(key) // before shared, which may parse past it
		v, err := p.shared(k)
		(*m)[k] = v
		return err
	})
}

// entry parses one container of the list.
func (p *listParser) entry(e *listed) error {
	return p.each('{', func(key []byte) error {
		field := fieldOf(key)
		if isNull, err := p.null(); isNull || err != nil {
			// As in encoding/json: null empties a list or a map, and
			// leaves any other field as it is.
			switch field {
			case "Names":
				e.Names = nil
			case "Labels":
				e.Labels = nil
			}
			return err
		}
		var err error
		switch field {
		case "Id":
			e.ID, err = p.str()
		case "Names":
			e.Names, err = p.stringList()
		case "Image":
			// The fields' slots in last are named with a space first, apart
			// from the labels'. A clash would cost only a miss.
			e.Image, err = p.shared(" Image")
		case "ImageID":
			e.ImageID, err = p.shared(" ImageID")
		case "Created":
			var num []byte
			if num, err = p.number(); err == nil {
				e.Created, err = strconv.ParseInt(string(num), 10, 64)
			}
		case "State":
			e.State, err = p.shared(" State")
		case "Status":
			e.Status, err = p.shared(" Status")
		case "Labels":
			err = p.labels(&e.Labels)
		default:
			err = p.skip()
		}
		return err
	})
}

// listedFields are the JSON names of listed's fields.
var listedFields = [...]string{"Id", "Names", "Image", "ImageID", "Created", "State", "Status", "Labels"}

// fieldOf returns the field that key names. As in encoding/json, a key
// that is not exact matches a field whose name it equals but for case.
func fieldOf(key []byte) string {
	for _, f := range listedFields {
		if string(key) == f {
			return f
		}
	}
	for _, f := range listedFields {
		if len(key) == len(f) && bytes.EqualFold(key, []byte(f)) {
			return f
		}
	}
	return ""
}

// decodeList decodes the engine's list, a JSON array, or null for none.
// It reads the answer as it comes, through a small buffer.
func decodeList(body io.Reader, list *[]listed) error {
	p := &listParser{r: body, buf: make([]byte, 0, 64<<10), names: map[string]string{}, last: map[string]string{}}
	isNull, err := p.null()
	if err != nil {
		return err
	}
	if !isNull {
		if *list == nil {
			*list = []listed{}
		}
		err = p.each('[', func([]byte) error {
			var e listed
			err := p.entry(&e)
			*list = append(*list, e)
			return err
		})
		if err != nil {
			return err
		}
	}
	if _, err := p.next(); !errors.Is(err, io.ErrUnexpectedEOF) {
		if err == nil {
			err = p.fail("data after the list")
		}
		return err
	}
	return nil
}
