package ledger

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
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

// cutKV commits transactions until left reaches zero, then cancels: the
// import is cut off there, as by a SIGKILL between two transactions.
type cutKV struct {
	clientv3.KV
	left   *atomic.Int32
	cancel func()
}

func (k cutKV) Txn(ctx context.Context) clientv3.Txn { return cutTxn{k.KV.Txn(ctx), k} }

type cutTxn struct {
	clientv3.Txn
	k cutKV
}

func (t cutTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { return cutTxn{t.Txn.If(cs...), t.k} }
func (t cutTxn) Then(ops ...clientv3.Op) clientv3.Txn { return cutTxn{t.Txn.Then(ops...), t.k} }
func (t cutTxn) Else(ops ...clientv3.Op) clientv3.Txn { return cutTxn{t.Txn.Else(ops...), t.k} }

func (t cutTxn) Commit() (*clientv3.TxnResponse, error) {
	if t.k.left.Add(-1) < 0 {
		t.k.cancel()
		return nil, context.Canceled
	}
	return t.Txn.Commit()
}

// TestEtcdImportInterruptedResumes cuts an import into etcd off after its
// marker and two batches of its writes: seen from another host, the ledger
// issues no id, reads no current build and lists nothing (exit 1, "being
// imported"), and another import is refused; the same import run again
// finishes it, and the ledger is then the exported one and goes on from
// its last id.
func TestEtcdImportInterruptedResumes(t *testing.T) {
	src, _ := newTestLedger(t)
	fillLedger(t, src, 150)
	out := export(t, src)

	dst := testEtcd(t)
	s := dst.st.(*etcdStore)
	ictx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var left atomic.Int32
	left.Store(3)
	s.wrapKV = func(kv clientv3.KV) clientv3.KV { return cutKV{kv, &left, cancel} }
	if _, err := dst.Import(ictx, strings.NewReader(out)); err == nil {
		t.Fatal("the import was not cut off: the test proves nothing")
	}
	s.wrapKV = nil

	other := etcdClient(t, s.cfg)
	if _, err := other.Request(ctx, []string{"app"}, ""); exitCodeOf(err) != 1 || !strings.Contains(err.Error(), "being imported") {
		t.Errorf("request into a half-imported ledger: %v; want exit 1, being imported", err)
	}
	if _, err := other.Current("app"); exitCodeOf(err) != 1 || !strings.Contains(err.Error(), "being imported") {
		t.Errorf("current of a half-imported ledger: %v; want exit 1, being imported", err)
	}
	if bs, err := other.List(ctx, ""); err == nil {
		t.Errorf("list of a half-imported ledger: %d builds; want a refusal", len(bs))
	}
	small, _ := newTestLedger(t)
	fillLedger(t, small, 2)
	if _, err := other.Import(ctx, strings.NewReader(export(t, small))); exitCodeOf(err) != 2 {
		t.Errorf("another import into the half-imported ledger: %v; want exit 2", err)
	}

	if _, err := other.Import(ctx, strings.NewReader(out)); err != nil {
		t.Fatalf("the same import again: %v", err)
	}
	if again := export(t, other); again != out {
		t.Fatalf("export after the resumed import differs")
	}
	imported := strings.Split(strings.Split(out, `"last":"`)[1], `"`)[0]
	if next := request(t, other, "app").Builds[0].ID; next[2:] <= imported {
		t.Errorf("id %s issued after the import is not after the imported last id %s", next, imported)
	}
}

// etcdImporter is a child process of TestEtcdImportKilledResumes: it
// imports the export file at path into the etcd ledger at
// MESHCTL_LEDGER_TEST_ETCD under MESHCTL_LEDGER_TEST_PREFIX, as
// meshctl build import does.
func etcdImporter(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	l, err := OpenEtcd(EtcdConfig{Endpoints: strings.Split(os.Getenv("MESHCTL_LEDGER_TEST_ETCD"), ","),
		Prefix: os.Getenv("MESHCTL_LEDGER_TEST_PREFIX"), Timeout: 20 * time.Second})
	if err != nil {
		return err
	}
	defer l.Close()
	_, err = l.Import(context.Background(), f)
	return err
}

// killImport runs an importer of path into cfg's ledger and SIGKILLs it as
// soon as its marker shows in etcd's history (a watch from before it
// started). It reports whether the kill landed mid-import: the marker is
// still there.
func killImport(t *testing.T, cfg EtcdConfig, path string) bool {
	t.Helper()
	cli, err := etcdClient(t, cfg).st.(*etcdStore).client()
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	marker := cfg.Prefix + "/ledger/importing"
	now, err := cli.Get(wctx, marker)
	if err != nil {
		t.Fatal(err)
	}
	wch := cli.Watch(wctx, marker, clientv3.WithRev(now.Header.Revision+1))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeVar+"=etcd-import", childDirVar+"="+path,
		"MESHCTL_LEDGER_TEST_ETCD="+strings.Join(cfg.Endpoints, ","), "MESHCTL_LEDGER_TEST_PREFIX="+cfg.Prefix)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for resp := range wch {
		if len(resp.Events) > 0 || resp.Err() != nil {
			break
		}
	}
	_ = cmd.Process.Kill() // our own child, by its pid
	_ = cmd.Wait()
	got, err := cli.Get(context.Background(), marker)
	if err != nil {
		t.Fatal(err)
	}
	return len(got.Kvs) == 1
}

// TestEtcdImportKilledResumes is a killed import, as it was found: an
// import SIGKILLed while it writes. The ledger then issues no id and
// answers nothing (exit 1, "being imported"), another import is refused
// (exit 2), and the same import run again finishes it, whole.
func TestEtcdImportKilledResumes(t *testing.T) {
	src, _ := newTestLedger(t)
	fillLedger(t, src, 200)
	out := export(t, src)
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	if err := os.WriteFile(path, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testEtcd(t).st.(*etcdStore).cfg
	base := cfg.Prefix
	// The kill may come after the last transaction: then again, elsewhere.
	for n := 1; ; n++ {
		cfg.Prefix = fmt.Sprintf("%s-%d", base, n)
		if killImport(t, cfg, path) {
			t.Logf("import %d SIGKILLed before its end", n)
			break
		}
		if n == 5 {
			t.Fatal("5 imports, none SIGKILLed before its end: the test proves nothing")
		}
	}

	l := etcdClient(t, cfg)
	if _, err := l.Request(ctx, []string{"app"}, ""); exitCodeOf(err) != 1 || !strings.Contains(err.Error(), "being imported") {
		t.Errorf("request into a ledger whose import was killed: %v; want exit 1, being imported", err)
	}
	if _, err := l.Current("app"); exitCodeOf(err) != 1 || !strings.Contains(err.Error(), "being imported") {
		t.Errorf("current of a ledger whose import was killed: %v; want exit 1, being imported", err)
	}
	small, _ := newTestLedger(t)
	fillLedger(t, small, 2)
	if _, err := l.Import(ctx, strings.NewReader(export(t, small))); exitCodeOf(err) != 2 {
		t.Errorf("another import into it: %v; want exit 2", err)
	}
	if _, err := l.Import(ctx, strings.NewReader(out)); err != nil {
		t.Fatalf("the same import again: %v", err)
	}
	if again := export(t, l); again != out {
		t.Fatal("export after the import run again differs")
	}
	imported := strings.Split(strings.Split(out, `"last":"`)[1], `"`)[0]
	if next := request(t, l, "app").Builds[0].ID; next[2:] <= imported {
		t.Errorf("id %s issued after the import is not after the imported last id %s", next, imported)
	}
}

// TestEtcdImportMarkerAnswerLost: the import's first transaction (its
// marker) commits and its answer is lost; the retry finds the marker its
// own and goes on, rather than calling the ledger not empty.
func TestEtcdImportMarkerAnswerLost(t *testing.T) {
	src, _ := newTestLedger(t)
	fillLedger(t, src, 20)
	out := export(t, src)
	dst := testEtcd(t)
	s := dst.st.(*etcdStore)
	between := func() {}
	s.wrapKV = func(kv clientv3.KV) clientv3.KV { return hookKV{kv, &between} }
	if _, err := dst.Import(ctx, strings.NewReader(out)); err != nil {
		t.Fatalf("import whose marker's answer was lost: %v", err)
	}
	if between != nil {
		t.Fatal("no answer was lost: the test proves nothing")
	}
	s.wrapKV = nil
	if again := export(t, dst); again != out {
		t.Fatal("export after the import differs")
	}
}
