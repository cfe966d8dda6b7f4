package mesh

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocExamples decodes every complete mesh file the project shows a
// reader. It takes each ```yaml or ```json block of README.md and
// docs/*.md that starts with "modules:" (or {"modules"), after comment
// lines. It takes each <<'EOF' here-document that does: the README's first
// run writes its mesh.yaml so. And it loads examples/*/*.yaml. A field
// renamed or a default tightened breaks the example here, not for the
// reader.
func TestDocExamples(t *testing.T) {
	repo := filepath.Join("..", "..")
	docs, _ := filepath.Glob(filepath.Join(repo, "docs", "*.md"))
	docs = append(docs, filepath.Join(repo, "README.md"))
	block := regexp.MustCompile("(?ms)^```(yaml|json)\\n(.*?)^```|<<'EOF'\\n(.*?)^EOF$")
	perFile := map[string]int{}
	for _, path := range docs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatchIndex(b, -1) {
			from, to := m[4], m[5]
			if from < 0 {
				from, to = m[6], m[7] // a here-document
			}
			body := string(b[from:to])
			// Leading comment lines ("# mesh.yaml") name the file.
			start := body
			for strings.HasPrefix(start, "#") {
				_, start, _ = strings.Cut(start, "\n")
			}
			if !strings.HasPrefix(start, "modules:") && !strings.HasPrefix(start, `{"modules"`) {
				continue
			}
			line := 1 + strings.Count(string(b[:from]), "\n")
			name := fmt.Sprintf("%s:%d", filepath.Base(path), line)
			perFile[filepath.Base(path)]++
			if _, err := Decode(name, []byte(body)); err != nil {
				t.Errorf("example at %s does not decode: %v", name, err)
			}
		}
	}
	examples, _ := filepath.Glob(filepath.Join(repo, "examples", "*", "*.yaml"))
	for _, path := range examples {
		perFile[filepath.Base(path)]++
		if _, err := Load(path, nil); err != nil {
			t.Errorf("%s does not load: %v", path, err)
		}
	}
	// The pages that carry examples must still have them: a test that
	// finds none proves nothing.
	for file, atLeast := range map[string]int{"mesh-file.md": 4, "README.md": 1, "mesh.yaml": 1} {
		if perFile[file] < atLeast {
			t.Errorf("%s: %d complete mesh files found, want at least %d", file, perFile[file], atLeast)
		}
	}
}
