package cli

import (
	"bytes"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestWarningNotOverwrittenByProgress: on a terminal, a warning written
// while a container's line is live must stay on the screen when that line
// next updates in place. The renderer moves the cursor up over the lines it
// knows of, so a warning written past it would be the line it rewrites.
func TestWarningNotOverwrittenByProgress(t *testing.T) {
	var out bytes.Buffer
	e := NewEnv(strings.NewReader(""), &bytes.Buffer{}, &out)
	e.StderrTTY = true
	p := e.Progress()
	p.Status("store.registry", "pulling")
	e.Warnf("step store/gc: image meshtest/gc:1 cannot be had")
	p.Status("store.registry", "created")
	e.closeProgress()

	screen := render(out.String())
	if !slicesContainsPrefix(screen, "warning: step store/gc: image meshtest/gc:1 cannot be had") {
		t.Errorf("the warning is not on the screen:\n%s\n(raw %q)", strings.Join(screen, "\n"), out.String())
	}
	if !slicesContainsPrefix(screen, "store.registry: created") {
		t.Errorf("the container's line is not on the screen:\n%s", strings.Join(screen, "\n"))
	}
}

func slicesContainsPrefix(lines []string, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			return true
		}
	}
	return false
}

var csiRE = regexp.MustCompile(`^\x1b\[(\d*)([A-Za-z])`)

// render plays what a terminal shows for out: text, \n (to the next line's
// start, as a terminal's output processing makes it), \r, and the cursor
// codes the renderer uses (up, down, erase line).
func render(out string) []string {
	var lines [][]rune
	row, col := 0, 0
	at := func() {
		for len(lines) <= row {
			lines = append(lines, nil)
		}
	}
	for i := 0; i < len(out); {
		if m := csiRE.FindStringSubmatch(out[i:]); m != nil {
			n, _ := strconv.Atoi(m[1])
			switch m[2] {
			case "A":
				row = max(row-max(n, 1), 0)
			case "B":
				row += max(n, 1)
			case "K":
				at()
				lines[row] = nil
			}
			i += len(m[0])
			continue
		}
		r := []rune(out[i:])[0]
		i += len(string(r))
		switch r {
		case '\n':
			row, col = row+1, 0
		case '\r':
			col = 0
		default:
			at()
			for len(lines[row]) <= col {
				lines[row] = append(lines[row], ' ')
			}
			lines[row][col] = r
			col++
		}
	}
	screen := make([]string, len(lines))
	for i, l := range lines {
		screen[i] = strings.TrimRight(string(l), " ")
	}
	return screen
}

// TestWarningEndsItsLine checks that a warning ends with one newline, whether
// or not its format has one. The metrics file's warning had none, so the
// shell prompt followed it on the same line.
func TestWarningEndsItsLine(t *testing.T) {
	for _, format := range []string{"metrics file %s not written", "metrics file %s not written\n"} {
		var out bytes.Buffer
		e := NewEnv(strings.NewReader(""), &bytes.Buffer{}, &out)
		e.Warnf(format, "/x.prom")
		if got, want := out.String(), "warning: metrics file /x.prom not written\n"; got != want {
			t.Errorf("Warnf(%q) wrote %q, want %q", format, got, want)
		}
	}
}
