package mesh

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// syntaxCase is a file that does not parse, and how its error reads.
type syntaxCase struct {
	name         string
	src          string
	line, column int
	msg          string // after "not valid YAML: "
	shown        string // the excerpt: the line, and a caret under the column
}

func syntaxCases() []syntaxCase {
	return []syntaxCase{
		{name: "unclosed list at the end", src: base + "        command: [serve\n", line: 6, column: 18,
			msg:   "the list that starts with '[' at line 6, column 18 is not closed: a ']' is missing, or a ',' between its items",
			shown: "    6 |         command: [serve\n      |                  ^"},
		{name: "unclosed list before a key", src: base + "        command: [serve, x\n        restart: no\n", line: 7, column: 16,
			msg:   "the list that starts with '[' at line 6, column 18 is not closed",
			shown: "    7 |         restart: no\n      |                ^"},
		{name: "list item in a map", src: "modules: {}\n- store\n", line: 2, column: 1,
			msg:   "this is not a key of the map that starts at line 1, column 1: check the indentation",
			shown: "    2 | - store\n      | ^"},
		{name: "unclosed list in one-line JSON", src: `{"modules": {"store": ["a"}}`, line: 1, column: 27,
			msg:   "the list that starts with '[' at line 1, column 23 is not closed",
			shown: `    1 | {"modules": {"store": ["a"}}` + "\n      |                           ^"},
		{name: "unclosed list in indented JSON", src: "{\n  \"modules\": {\n    \"store\": [\"a\"\n  }\n}\n", line: 4, column: 3,
			msg:   "the list that starts with '[' at line 3, column 14 is not closed",
			shown: "    4 |   }\n      |   ^"},
		{name: "misplaced brace in indented JSON", src: "{\n  \"modules\": {\n    \"store\": [\n  }\n}\n", line: 4, column: 3,
			msg: "a value was expected here", shown: "    4 |   }\n      |   ^"},
		{name: "tab indentation", src: base + "        labels: {}\n\tnetwork: host\n", line: 7, column: 1,
			msg: "a tab indents this line: YAML indents with spaces only", shown: "    7 | \tnetwork: host\n      | ^"},
		{name: "tab after spaces", src: base + "  \t  restart: no\n", line: 6, column: 3,
			msg: "a tab indents this line", shown: "    6 |   \t  restart: no\n      |   ^"},
		{name: "key without a colon", src: base + "        restart\n        pull: always\n", line: 6, column: 9,
			msg:   "this key has no ':' on its line: add the ':', or write the key on one line",
			shown: "    6 |         restart\n      |         ^"},
		{name: "colon after a plain value", src: base + "        network: host\n        restart: no: x\n", line: 7, column: 20,
			msg:   "this ':' cannot start a value: a key above may lack its ':'",
			shown: "    7 |         restart: no: x\n      |                    ^"},
		{name: "unclosed quote", src: base + "        network: \"host\n", line: 6, column: 18,
			msg:   "the quoted value that starts at line 6, column 18 is not closed: end it with the same quote",
			shown: "    6 |         network: \"host\n      |                  ^"},
		{name: "plain value starting with @", src: base + "        network: @host\n", line: 6, column: 18,
			msg: `a value cannot start with '@': quote the value`, shown: "    6 |         network: @host\n      |                  ^"},
		{name: "unknown alias", src: base + "        labels: *common\n", line: 6, column: 17,
			msg: "the alias *common names no anchor: mark a value above it with &common", shown: "    6 |         labels: *common\n      |                 ^"},
		{name: "CR LF lines", src: strings.ReplaceAll(src(base)+"        command: [serve, x\n        restart: no\n", "\n", "\r\n"), line: 7, column: 16,
			msg: "the list that starts with '[' at line 6, column 18 is not closed", shown: "    7 |         restart: no\n      |                ^"},
	}
}

// TestDecodeSyntaxError decodes files that are not YAML. Each error names
// the line and column, says the problem in the file's words, and shows the
// line with a caret under the column. It says the rest of the file is
// checked once this is fixed. It never gives the parser's own words.
func TestDecodeSyntaxError(t *testing.T) {
	for _, tt := range syntaxCases() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Decode("mesh.yaml", []byte(src(tt.src)))
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Decode = %v, want a *DecodeError", err)
			}
			if de.Line != tt.line || de.Column != tt.column || de.Field != "" || len(de.More) > 0 {
				t.Errorf("error at line %d, column %d, field %q, %d more; want line %d, column %d:\n%v",
					de.Line, de.Column, de.Field, len(de.More), tt.line, tt.column, err)
			}
			got := err.Error()
			first, _, _ := strings.Cut(got, "\n")
			if want := "mesh.yaml:" + strconv.Itoa(tt.line) + ":" + strconv.Itoa(tt.column) + ": not valid YAML: "; !strings.HasPrefix(first, want) ||
				!strings.Contains(first, tt.msg) {
				t.Errorf("Error() = %q\nwant it to start %q and hold %q", got, want, tt.msg)
			}
			if !strings.Contains(got, "\n"+tt.shown+"\n") {
				t.Errorf("Error() = %q\nwant it to show\n%s", got, tt.shown)
			}
			if !strings.HasSuffix(got, "\nThe rest of the file is checked once this is fixed.") {
				t.Errorf("Error() = %q\nwant it to end saying the rest is checked once this is fixed", got)
			}
			for _, raw := range []string{"did not find", "found character", "mapping values", "yaml: "} {
				if strings.Contains(got, raw) {
					t.Errorf("Error() = %q holds the parser's words %q", got, raw)
				}
			}
		})
	}
}

// TestDecodeSyntaxErrorHidesSecrets decodes files whose syntax error is in
// env or in a log driver's options. The line is not shown, since it may
// hold a secret.
func TestDecodeSyntaxErrorHidesSecrets(t *testing.T) {
	for _, s := range []string{
		base + "        env: {API_TOKEN: \"hunter2hunter2}\n",
		base + "        env:\n          API_TOKEN: [hunter2hunter2\n",
		base + "        env:\n          - API_TOKEN=hunter2hunter2\n         - B=1\n",
		base + "        logging:\n          driver: splunk\n          options: {splunk-token: \"hunter2hunter2}\n",
		`{"modules": {"store": {"containers": {"registry": {"env": {"API_TOKEN": "hunter2hunter2"]}}}}`,
	} {
		_, err := Decode("mesh.yaml", []byte(src(s)))
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "(not shown: it may hold a value of env or of logging options)") {
			t.Errorf("Decode(%q) = %v\nwant the line withheld", s, err)
		}
	}
}

// TestDecodeSyntaxErrorLongLine decodes a one-line JSON file of 20 KB with
// a syntax error near its end. The excerpt shows a window of the line
// around the column, not all of it, with the caret under the column.
func TestDecodeSyntaxErrorLongLine(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"modules": {"store": {"containers": {`)
	for i := range 500 {
		b.WriteString(`"c` + strings.Repeat("x", 20) + strconv.Itoa(i) + `": {"image": "x"}, `)
	}
	b.WriteString(`"last": {"image": ["x"}}}}}`)
	_, err := Decode("mesh.yaml", []byte(b.String()))
	var de *DecodeError
	if !errors.As(err, &de) || de.Line != 1 || de.Column != b.Len()-4 {
		t.Fatalf("Decode = %v, want an error at line 1, column %d", err, b.Len()-4)
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 4 || len([]rune(lines[1])) > shownWidth+12 {
		t.Fatalf("Error() = %q\nwant a window of the line and a caret", err)
	}
	shown, caret := []rune(lines[1]), []rune(lines[2])
	if i := len(caret) - 1; caret[i] != '^' || shown[i] != '}' {
		t.Errorf("the caret is under %q, want '}':\n%s\n%s", shown[i], lines[1], lines[2])
	}
}
