package apply

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/meshctl/meshctl/pkg/coord"
	"github.com/meshctl/meshctl/pkg/record"
	"github.com/meshctl/meshctl/pkg/state"
)

// TestStateDirDocExamples decodes the file examples of docs/state-dir.md
// into the types that read those files, refusing unknown fields: a field
// renamed in the code and not in the page fails here.
func TestStateDirDocExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "state-dir.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?ms)^```json\\n(.*?)^```")
	kinds := map[string]func() any{
		`"holds"`:      func() any { return &coord.HoldsDoc{} },
		`"windows"`:    func() any { return &coord.History{} },
		`"applied_at"`: func() any { return &record.Applied{} },
		`"claims"`:     func() any { return &coord.ClaimsDoc{} },
		`"id": "`: func() any {
			return &struct {
				state.Header
				ID string `json:"id"`
			}{}
		},
	}
	seen := map[string]bool{}
	for _, m := range block.FindAllSubmatch(b, -1) {
		body := m[1]
		if bytes.Contains(body, []byte("…")) {
			continue // an abbreviated example (the ledger's)
		}
		for _, key := range []string{`"holds"`, `"windows"`, `"applied_at"`, `"claims"`, `"id": "`} {
			if !bytes.Contains(body, []byte(key)) {
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			v := kinds[key]()
			if err := dec.Decode(v); err != nil {
				t.Errorf("docs/state-dir.md example %s…: %v", strings.SplitN(string(body), "\n", 2)[0], err)
			}
			seen[key] = true
			break
		}
	}
	for key := range kinds {
		if !seen[key] {
			t.Errorf("docs/state-dir.md: no example with %s found", key)
		}
	}
}
