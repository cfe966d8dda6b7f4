package ledger

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"

	"github.com/meshctl/meshctl/pkg/state"
)

// newTestLedger returns a ledger in a fresh state directory, with a clock
// that moves on by a millisecond at each reading.
func newTestLedger(t testing.TB) (*Ledger, *state.Dir) {
	t.Helper()
	d, err := state.Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2025, 3, 1, 3, 30, 0, 0, time.UTC)
	l := New(d)
	l.Now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	return l, d
}

func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var c interface{ Fault() fault.Kind }
	if errors.As(err, &c) {
		return contractExit[c.Fault()]
	}
	return 1
}

// contractExit is the exit status CONTRACT §3 gives each kind of failure
// (pkg/cli maps them; the ledger's tests check the contract's numbers).
var contractExit = map[fault.Kind]int{
	fault.Failed: 1, fault.BadInput: 2, fault.Busy: 3, fault.Conflict: 4, fault.Interrupted: 130,
}

func mustImage(t testing.TB, ref string) *Image {
	t.Helper()
	img, err := ParseImage(ref)
	if err != nil {
		t.Fatal(err)
	}
	return &img
}

func request(t testing.TB, l *Ledger, modules ...string) Plan {
	t.Helper()
	p, err := l.Request(context.Background(), modules, "")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func rec(t testing.TB, l *Ledger, id, image string) Recorded {
	t.Helper()
	var img *Image
	if image != "" {
		img = mustImage(t, image)
	}
	r, err := l.Record(context.Background(), id, img, "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// snapshot returns the contents of every file of the ledger directory.
func snapshot(t testing.TB, d *state.Dir) map[string]string {
	t.Helper()
	files := map[string]string{}
	entries, err := os.ReadDir(filepath.Join(d.Path(), subdir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(d.Path(), subdir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = string(b)
	}
	return files
}

func digestImage(name string, n int) string {
	const hex = "0123456789abcdef"
	b := make([]byte, 64)
	for i := range b {
		b[i] = hex[(n>>(4*(i%8)))&15]
	}
	return name + "@sha256:" + string(b)
}

// Current returns module's current build from a lock-free snapshot of its
// ledger file in the state directory d, and false if it has none.
func Current(d *state.Dir, module string) (Build, bool, error) {
	return New(d).CurrentBuild(context.Background(), module)
}

// Currents returns the current build of every module of d's file ledger
// that has one.
func Currents(d *state.Dir) ([]Build, error) {
	return New(d).Currents(context.Background())
}
