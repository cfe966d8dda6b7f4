// Package lazyre compiles a package-level regular expression on its first use, not when the
// process starts. Every meshctl command pays for the package initialisation of every package
// linked in, and a no-op apply uses none of the expressions that validate a changed file: compiled
// at start-up they cost about a millisecond of each run (docs/performance.md).
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr once, on its first call, and returns it then and
// after. expr must be a valid expression: an invalid one panics at that first call, as
// regexp.MustCompile would at start-up.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
