package ledger

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// TestRequestKilledBeforePlansFile: "build request --plan" writes the index
// (which issues the builds) and then plans.json. Killed between the two, the
// plan must not read settled while the builds it was just given are pending,
// and the next request repairs plans.json.
func TestRequestKilledBeforePlansFile(t *testing.T) {
	l, d := newTestLedger(t)
	p := request(t, l, "web")
	rec(t, l, p.Builds[0].ID, "reg/web:1")
	checkSettled(t, l, p.ID, true)

	plansPath := filepath.Join(d.Path(), plansFile)
	before, err := os.ReadFile(plansPath)
	if err != nil {
		t.Fatal(err)
	}
	more, err := l.Request(ctx, []string{"db"}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plansPath, before, 0o600); err != nil { // the kill
		t.Fatal(err)
	}
	checkSettled(t, l, p.ID, false)
	got, err := l.Plan(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(got.Builds, func(b Build) bool { return b.ID == more.Builds[0].ID && b.State == StatePending }) {
		t.Errorf("plan %s does not show its pending build %s: %+v", p.ID, more.Builds[0].ID, got.Builds)
	}

	// The next request of the plan writes plans.json whole again.
	third, err := l.Request(ctx, []string{"cache"}, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	rec(t, l, more.Builds[0].ID, "reg/db:1")
	checkSettled(t, l, p.ID, false)
	rec(t, l, third.Builds[0].ID, "reg/cache:1")
	checkSettled(t, l, p.ID, true)
	got, err = l.Plan(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Builds) != 3 {
		t.Errorf("plan %s after the repair: %+v, want its 3 builds", p.ID, got.Builds)
	}
}

// TestPlanWithoutBuildsIsNotSettled: a plan that asked for nothing (a
// plans.json left so by hand or by a bug) has nothing recorded: not settled.
func TestPlanWithoutBuildsIsNotSettled(t *testing.T) {
	l, d := newTestLedger(t)
	p := request(t, l, "web")
	rec(t, l, p.Builds[0].ID, "reg/web:1")
	lk, err := d.Lock(ctx, lockName, state.LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.Write(plansFile, &plansDoc{Plans: []planRec{{ID: p.ID}}}); err != nil {
		t.Fatal(err)
	}
	lk.Unlock()
	checkSettled(t, l, p.ID, false)
}

// TestLedgerReadsRefuseSymlinkedDir: every reader of the ledger (current,
// list, plan, and apply's Current) refuses a symlinked ledger/, exit 2,
// naming it.
func TestLedgerReadsRefuseSymlinkedDir(t *testing.T) {
	l, d := newTestLedger(t)
	p := request(t, l, "web")
	rec(t, l, p.Builds[0].ID, "reg/web:1")
	dir := filepath.Join(d.Path(), subdir)
	moved := filepath.Join(t.TempDir(), "ledger")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, dir); err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		if exitCodeOf(err) != 2 || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("%s through a symlinked ledger/: %v, want exit 2 naming %s", what, err, dir)
		}
	}
	_, _, err := Current(d, "web")
	check("Current", err)
	_, err = Currents(d)
	check("Currents", err)
	_, err = l.List(ctx, "")
	check("List", err)
	_, err = l.Plan(ctx, p.ID)
	check("Plan", err)
	_, err = l.Request(ctx, []string{"web"}, "")
	check("Request", err)
}

// TestLedgerUnreadableFileIsBadInput: a directory where a ledger file
// should be is exit 2, naming it, for every reader.
func TestLedgerUnreadableFileIsBadInput(t *testing.T) {
	l, d := newTestLedger(t)
	p := request(t, l, "web")
	index := filepath.Join(d.Path(), indexFile)
	if err := os.Remove(index); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(index, 0o700); err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(d.Path(), moduleFile("web"))
	if err := os.Mkdir(module, 0o700); err != nil {
		t.Fatal(err)
	}
	check := func(what, path string, err error) {
		t.Helper()
		if exitCodeOf(err) != 2 || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want exit 2 naming %s", what, err, path)
		}
	}
	_, _, err := Current(d, "web")
	check("Current", module, err)
	_, err = l.List(ctx, "web")
	check("List", index, err)
	_, err = l.Plan(ctx, p.ID)
	check("Plan", index, err)
	_, err = l.Record(ctx, p.Builds[0].ID, nil, "")
	check("Record", index, err)
}

// TestKillLeavesNoTempAfterNextCommand SIGKILLs a process that requests and
// records in a loop (writing the index, plans, heads, chunks, archive
// segments and catalogs) at random instants: the next ledger command, which
// takes the ledger lock, leaves no temp file behind, wherever the kill left
// one.
func TestKillLeavesNoTempAfterNextCommand(t *testing.T) {
	kills := 20
	if testing.Short() {
		kills = 5
	}
	l, d := newTestLedger(t)
	l.LockTimeout = 10 * time.Second
	left := 0
	for k := range kills {
		cmd := startRecorder(t, d.Path(), k)
		time.Sleep(time.Duration(rand.IntN(20000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		if len(temps(t, d.Path())) > 0 {
			left++
		}
		if _, err := l.Request(ctx, []string{"app"}, ""); err != nil {
			t.Fatalf("kill %d: the next request: %v", k, err)
		}
		if tmp := temps(t, d.Path()); len(tmp) > 0 {
			t.Fatalf("kill %d: temp files left after the next command: %v", k, tmp)
		}
	}
	if left == 0 {
		t.Fatalf("none of %d kills landed mid-write: the test proved nothing", kills)
	}
	t.Logf("%d of %d kills left a temp file, each removed by the next command", left, kills)
}

func temps(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.Contains(e.Name(), ".tmp") {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
