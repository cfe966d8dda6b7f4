package ledger

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// fillLedger gives l a history: plans of several modules, builds recorded
// out of order, failed and pending ones.
func fillLedger(t *testing.T, l *Ledger, n int) (pendingOld string) {
	t.Helper()
	pendingOld = request(t, l, "app").Builds[0].ID // stays pending throughout
	for i := range n {
		p := request(t, l, "app", "db")
		switch i % 4 {
		case 0:
			rec(t, l, p.Builds[1].ID, digestImage("reg/db", i))
			rec(t, l, p.Builds[0].ID, digestImage("reg/app", i))
		case 1:
			rec(t, l, p.Builds[0].ID, "")
		case 2:
			q := request(t, l, "app")
			rec(t, l, q.Builds[0].ID, digestImage("reg/app", 1000+i))
			rec(t, l, p.Builds[0].ID, digestImage("reg/app", i)) // superseded
			rec(t, l, p.Builds[1].ID, digestImage("reg/db", i))
		}
	}
	return pendingOld
}

func export(t *testing.T, l *Ledger) string {
	t.Helper()
	var b bytes.Buffer
	if _, err := l.Export(ctx, &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestExportImport moves a file ledger with pruned builds into etcd and
// back out: the same ids, order, plans and outcomes; the moved ledger goes
// on by the same rule (ids after the last, a pruned build recorded again is
// idempotent or a conflict, an old pending build recorded late is
// superseded); an import into a ledger that is not empty is refused.
func TestExportImport(t *testing.T) {
	src, _ := newTestLedger(t)
	src.Retain, src.ChunkSize = 4, 2
	old := fillLedger(t, src, 40)
	first := request(t, src, "app").Builds[0].ID // a build to record again after the move
	rec(t, src, first, digestImage("reg/app", 7777))
	fillLedger(t, src, 20) // so that first is pruned
	out := export(t, src)
	if !strings.Contains(out, `"pruned":true`) || !strings.Contains(out, `"kind":"plan"`) {
		t.Fatalf("export lacks pruned builds or plans:\n%.2000s", out)
	}

	dst := testEtcd(t)
	n, err := dst.Import(ctx, strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if again := export(t, dst); again != out {
		t.Fatalf("export after import differs (%d builds imported)\nbefore:\n%.3000s\nafter:\n%.3000s", n, out, again)
	}
	for _, m := range []string{"app", "db"} {
		a, _ := src.Current(m)
		b, err := dst.Current(m)
		if err != nil || a.ID != b.ID || a.Image != b.Image {
			t.Errorf("current %s: %+v after import, want %+v (%v)", m, b, a, err)
		}
	}
	if _, err := dst.Import(ctx, strings.NewReader(out)); exitCodeOf(err) != 2 {
		t.Errorf("import into a non-empty ledger: %v, want exit 2", err)
	}

	// The rule goes on across the move.
	imported := strings.Split(strings.Split(out, `"last":"`)[1], `"`)[0]
	if next := request(t, dst, "app").Builds[0].ID; next[2:] <= imported {
		t.Errorf("id %s issued after the import is not after the imported last id %s", next, imported)
	}
	if r := rec(t, dst, first, digestImage("reg/app", 7777)); !r.Again {
		t.Errorf("pruned build recorded again with its image: %+v, want idempotent", r)
	}
	if _, err := dst.Record(ctx, first, mustImage(t, digestImage("reg/app", 1)), ""); exitCodeOf(err) != 4 {
		t.Errorf("pruned build recorded with another image: %v, want exit 4", err)
	}
	if r := rec(t, dst, old, digestImage("reg/app", 9)); r.Outcome != OutcomeSuperseded {
		t.Errorf("the oldest pending build recorded late: %s, want superseded", r.Outcome)
	}

	// From etcd into files: builds pruned by the file ledger have nowhere
	// to go there; a ledger without them moves.
	back, _ := newTestLedger(t)
	if _, err := back.Import(ctx, strings.NewReader(out)); err == nil || !strings.Contains(err.Error(), "pruned") {
		t.Errorf("import of pruned builds into files: %v, want a refusal naming them", err)
	}
	plain := testEtcd(t)
	fillLedger(t, plain, 12)
	out2 := export(t, plain)
	files, _ := newTestLedger(t)
	if _, err := files.Import(context.Background(), strings.NewReader(out2)); err != nil {
		t.Fatal(err)
	}
	if again := export(t, files); again != out2 {
		t.Errorf("etcd → files → export differs:\nbefore:\n%.2000s\nafter:\n%.2000s", out2, again)
	}
}
