package mesh

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	yaml4 "go.yaml.in/yaml/v4"

	"github.com/meshctl/meshctl/pkg/lazyre"
)

// syntaxError says a YAML syntax error in plain words. It names the line and
// column where the parser stopped, and shows that line with a caret. err is
// yaml.v3's error, whose words and line are the parser's own. The rest of
// the file cannot be checked until it parses, and the message says so.
func syntaxError(name string, data []byte, err error) *DecodeError {
	problem, line := parserWords(err)
	at, ok := locate(data, problem, line)
	if !ok {
		at = syntaxMark{line: line}
	}
	if line == 0 && !ok {
		// A reader error: a byte that is not UTF-8, or a control character.
		// yaml names no place for it.
		if l, c, what := badCharacter(data); l > 0 {
			at, problem = syntaxMark{line: l, column: c}, what
		}
	}
	lines := splitLines(data)
	ended := at.line > len(lines) || at.line > 0 && strings.TrimSpace(lines[at.line-1]) == ""
	if at.context.line > 0 && (ended || problem == "could not find expected ':'") {
		// What is left open, or the key that lacks its ':', starts at the
		// context.
		at.line, at.column = at.context.line, at.context.column
	}
	at.line = min(at.line, len(lines)+1)
	msg := "not valid YAML: " + plainSyntax(problem, at, charAt(lines, at))
	if shown := excerpt(lines, at); shown != "" {
		msg += "\n" + shown
	}
	msg += "\nThe rest of the file is checked once this is fixed."
	return &DecodeError{File: name, Line: at.line, Column: at.column, Msg: msg}
}

// parserWords returns the problem yaml.v3 names, and its line, 0 if none.
// yaml.v3 writes a parser error's line 0-based, and leaves it out on the
// first line.
func parserWords(err error) (problem string, line int) {
	problem = strings.TrimPrefix(err.Error(), "yaml: ")
	if m := lineRE().FindStringSubmatch(err.Error()); m != nil {
		line, _ = strconv.Atoi(m[1])
		problem = m[2]
	}
	if parserProblems[problem] {
		line++
	}
	return problem, line
}

// syntaxMark is where a syntax error is, and what the parser was reading.
// column is 0 when unknown.
type syntaxMark struct {
	line, column int
	context      struct{ line, column int }
}

var (
	v4ErrorRE = lazyre.New(`^yaml: (?:while [^:]* at (line \d+(?:, column \d+)?|<unknown position>): )?` +
		`(?:(line \d+(?:, column \d+)?|<unknown position>): )?`)
	v4MarkRE = lazyre.New(`^line (\d+)(?:, column (\d+))?$`)
)

// locate finds the line and column of a syntax error. yaml.v3 says only a
// line, and for an unclosed list the line where it opened. yaml.v4's
// parser, the same as v3's, also says the column and the context. v4 is
// given the file after an empty line, so that no mark falls on its line 0.
// That line goes unwritten. Its parser writes lines 0-based, and its scanner
// 1-based. The mark is taken only when it agrees with v3's line. v4 is a
// release candidate, and a panic of its own leaves the line without a
// column.
func locate(data []byte, problem string, v3line int) (at syntaxMark, ok bool) {
	defer func() {
		if recover() != nil {
			at, ok = syntaxMark{}, false
		}
	}()
	var n yaml4.Node
	shifted := append([]byte("\n"), strings.TrimPrefix(string(data), "\ufeff")...)
	err := yaml4.Unmarshal(shifted, &n)
	if err == nil {
		return syntaxMark{}, false
	}
	m := v4ErrorRE().FindStringSubmatch(err.Error())
	if m == nil {
		return syntaxMark{}, false
	}
	shift := 1
	if parserProblems[problem] {
		shift = 0
	}
	ctxLine, ctxCol, ctxOK := v4Mark(m[1], shift)
	line, col, ok := v4Mark(m[2], shift)
	switch {
	case !ok && !ctxOK:
		return syntaxMark{}, false
	case !ok:
		// One mark: the context and the problem are at one place.
		at.line, at.column = ctxLine, ctxCol
	default:
		at.line, at.column = line, col
		if ctxOK {
			at.context.line, at.context.column = ctxLine, ctxCol
		}
	}
	if v3line != 0 && v3line != at.line && v3line != at.context.line {
		return syntaxMark{}, false
	}
	if strings.HasPrefix(problem, "unknown anchor") {
		at.column-- // the composer's column is 1-based already
	}
	return at, true
}

// v4Mark reads yaml.v4's "line N, column M" as a line and a column of the
// file. A column left out is the first.
func v4Mark(s string, shift int) (line, column int, ok bool) {
	m := v4MarkRE().FindStringSubmatch(s)
	if m == nil {
		return 0, 0, false
	}
	line, _ = strconv.Atoi(m[1])
	column = 1
	if m[2] != "" {
		column, _ = strconv.Atoi(m[2])
	}
	line -= shift
	return line, column, line > 0
}

// plainSyntax says a parser's problem in the file's words, and what to do.
// at is where it is, and c the character there.
func plainSyntax(problem string, at syntaxMark, c rune) string {
	opened := fmt.Sprintf("at line %d, column %d", at.context.line, at.context.column)
	switch {
	case problem == "did not find expected ',' or ']'":
		return "the list that starts with '[' " + opened + " is not closed: a ']' is missing, or a ',' between its items"
	case problem == "did not find expected ',' or '}'":
		return "the map that starts with '{' " + opened + " is not closed: a '}' is missing, or a ',' between its entries"
	case problem == "did not find expected key" && at.context.line > 0:
		return "this is not a key of the map that starts " + opened + ": check the indentation (the keys of a map start in one column)"
	case problem == "did not find expected '-' indicator" && at.context.line > 0:
		return "this is not an item of the list that starts " + opened + ": check the indentation (the items of a list start with '- ' in one column)"
	case problem == "did not find expected node content":
		return "a value was expected here"
	case problem == "mapping values are not allowed in this context":
		return "this ':' cannot start a value: a key above may lack its ':', a value holding ': ' must be quoted, or the indentation is off"
	case problem == "block sequence entries are not allowed in this context":
		return "a list item ('- ') cannot start here: check the indentation, or quote a value that starts with '- '"
	case c == '\t' || strings.Contains(problem, "tab character"):
		return "a tab indents this line: YAML indents with spaces only"
	case problem == "found character that cannot start any token":
		return fmt.Sprintf("a value cannot start with %q: quote the value", c)
	case problem == "could not find expected ':'":
		return "this key has no ':' on its line: add the ':', or write the key on one line"
	case problem == "found unexpected end of stream" && at.context.line > 0:
		return "the quoted value that starts " + opened + " is not closed: end it with the same quote"
	case problem == "found unknown escape character" || strings.HasPrefix(problem, "did not find expected hex"):
		return `an unknown escape in a double-quoted value: write \\ for a backslash, or quote the value with ' instead`
	case problem == "did not find expected alphabetic or numeric character":
		return "an anchor (&) or an alias (*) needs a name, like &common"
	case strings.HasPrefix(problem, "the file is not UTF-8") || strings.HasPrefix(problem, "a control character"):
		return problem
	case strings.HasPrefix(problem, "unknown anchor '"):
		anchor := strings.TrimSuffix(strings.TrimPrefix(problem, "unknown anchor '"), "' referenced")
		return fmt.Sprintf("the alias *%s names no anchor: mark a value above it with &%s", anchor, anchor)
	case problem == "did not find expected <document start>":
		return "text after the end of the file's top-level map: check the indentation"
	case problem == "found undefined tag handle":
		return "an unknown tag (!…): write the value without a tag"
	}
	return "the parser says: " + problem
}

// badCharacter finds the first character YAML does not take. It returns its
// line and column and what it is, or a line of 0 when there is none. YAML
// takes tab and line breaks, and no other control character.
func badCharacter(data []byte) (line, column int, what string) {
	line, column = 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, column, "the file is not UTF-8 here: save it as UTF-8"
		case r == '\n' || r == '\r' || r == '\u0085' || r == '\u2028' || r == '\u2029':
			if r != '\n' || i == 0 || data[i-1] != '\r' {
				line++
			}
			column = 0
		case r != '\t' && r != '\ufeff' && (unicode.IsControl(r) || r == '\ufffe' || r == '\uffff'):
			return line, column, fmt.Sprintf("a control character (U+%04X) is here: YAML takes none but tab and line breaks", r)
		}
		i += size
		column++
	}
	return 0, 0, ""
}

// splitLines splits data into lines as YAML does. A line ends at LF, CR,
// CR LF, NEL, LS or PS. A file in UTF-16 has no lines to show.
func splitLines(data []byte) []string {
	if len(data) >= 2 && (data[0] == 0xfe && data[1] == 0xff || data[0] == 0xff && data[1] == 0xfe) {
		return nil
	}
	s := strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n").
		Replace(strings.TrimPrefix(string(data), "\ufeff"))
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// charAt is the character at a mark, 0 past the end of its line.
func charAt(lines []string, at syntaxMark) rune {
	if at.line < 1 || at.line > len(lines) || at.column < 1 {
		return 0
	}
	r := []rune(lines[at.line-1])
	if at.column > len(r) {
		return 0
	}
	return r[at.column-1]
}

// shownWidth is how much of a long line an excerpt shows. A one-line JSON
// file may be megabytes long.
const shownWidth = 100

// excerpt shows the line of a mark, with a caret under its column. It is ""
// past the file's end. A line that may hold a value of env or of a log
// driver's options is not shown, since those hold secrets.
func excerpt(lines []string, at syntaxMark) string {
	if at.line < 1 || at.line > len(lines) {
		return ""
	}
	gutter := fmt.Sprintf("%5d | ", at.line)
	blank := strings.Repeat(" ", len(gutter)-2) + "| "
	if mayHoldSecret(lines, at.line) {
		return gutter + "(not shown: it may hold a value of env or of logging options)"
	}
	r := []rune(strings.Map(printable, lines[at.line-1]))
	col := max(at.column, 1)
	start := 0
	if len(r) > shownWidth {
		start = max(0, min(col-1-shownWidth/2, len(r)-shownWidth))
	}
	end := min(len(r), start+shownWidth)
	text := string(r[start:end])
	pad := strings.Map(func(c rune) rune {
		if c == '\t' {
			return c
		}
		return ' '
	}, string(r[start:min(max(col-1, start), end)]))
	if start > 0 {
		text, pad = "…"+text, " "+pad
	}
	if end < len(r) {
		text += "…"
	}
	if at.column == 0 {
		return gutter + text
	}
	return gutter + text + "\n" + blank + pad + "^"
}

// printable is r, or U+FFFD for a control character but tab. A line shown
// must not move the terminal's cursor.
func printable(r rune) rune {
	if r != '\t' && (unicode.IsControl(r) || r == utf8.RuneError) {
		return '\uFFFD'
	}
	return r
}

var secretKeyRE = lazyre.New(`(^|[\s{,"'-])(env|options)["']?\s*:`)

// mayHoldSecret reports whether line n may hold a value of env or of a log
// driver's options. It does when it or a line it is indented under names
// one of them. The file does not parse, so its indentation is all there is.
func mayHoldSecret(lines []string, n int) bool {
	indent := len(lines[n-1])
	for i := n - 1; i >= 0; i-- {
		l := lines[i]
		trimmed := strings.TrimLeft(l, " \t")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if d := len(l) - len(trimmed); i == n-1 || d < indent {
			if secretKeyRE().MatchString(l) {
				return true
			}
			indent = d
		}
	}
	return false
}
