package mesh

import (
	"regexp"
	"testing"
)

// contractName is the rule for module, container and step names, as
// CONTRACT §4 writes it.
var contractName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// FuzzValidName checks ValidName against the contract's pattern, for any
// text: no name the contract refuses is accepted (a name becomes part of
// engine names, lock file names and the ledger's file names), and none it
// allows is refused.
func FuzzValidName(f *testing.F) {
	for _, s := range []string{"store", "a", "0-a", "a-", "A", "a_b", "a.b", "", "a/b", ".."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), contractName.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the contract says %v", s, got, want)
		}
	})
}
