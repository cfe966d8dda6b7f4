package mesh

import (
	"errors"
	"testing"
)

func TestPullRefused(t *testing.T) {
	for pull, want := range map[string]error{"": nil, "missing": nil, "always": nil, "never": ErrNeverPull} {
		c := Container{Pull: pull}
		if got := c.PullRefused(); !errors.Is(got, want) || (got == nil) != (want == nil) {
			t.Errorf("pull %q: PullRefused() = %v, want %v", pull, got, want)
		}
	}
}
