package ledger

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meshctl/meshctl/pkg/state"
)

// The tests in this file run real processes: the test binary re-executed
// in a child mode, named by this variable, on the state directory in
// ledgerTestDir.
const (
	childModeVar = "MESHCTL_LEDGER_TEST_CHILD"
	childDirVar  = "MESHCTL_LEDGER_TEST_DIR"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeVar); mode != "" {
		if err := runChild(mode, os.Getenv(childDirVar)); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runChild(mode, dir string) error {
	if mode == "etcd-builder" {
		return etcdBuilder()
	}
	if mode == "etcd-import" {
		return etcdImporter(dir)
	}
	d, err := state.Open(dir)
	if err != nil {
		return err
	}
	l := New(d)
	l.LockTimeout = time.Minute
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	switch mode {
	case "request-record":
		// 25 builds: one, then 12 pairs whose newer build is recorded before
		// the older one. So every process records an older build last, and
		// the last record never comes from the newest request.
		record := func(id string, n int) error {
			img, _ := ParseImage(digestImage("reg/app", os.Getpid()<<8|n))
			if _, err := l.Record(ctx, id, &img, ""); err != nil {
				return err
			}
			fmt.Fprintln(out, id, img.Ref)
			return nil
		}
		next := func() (string, error) {
			p, err := l.Request(ctx, []string{"app"}, "")
			if err != nil {
				return "", err
			}
			return p.Builds[0].ID, nil
		}
		first, err := next()
		if err != nil {
			return err
		}
		if err := record(first, 0); err != nil {
			return err
		}
		for i := 1; i < 25; i += 2 {
			older, err := next()
			if err != nil {
				return err
			}
			newer, err := next()
			if err != nil {
				return err
			}
			time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
			if err := record(newer, i+1); err != nil {
				return err
			}
			if err := record(older, i); err != nil {
				return err
			}
		}
		return nil
	case "record-forever":
		// Small chunks and retention, so that flushes, archive merges and
		// removals happen all the time.
		l.Retain, l.ChunkSize = 3, 2
		fmt.Println("ready") // unbuffered: the parent times its kill from here
		for i := 0; ; i++ {
			p, err := l.Request(ctx, []string{"app", "db"}, "")
			if err != nil {
				return err
			}
			for j, b := range p.Builds {
				var img *Image
				if (i+j)%5 != 0 {
					parsed, _ := ParseImage(digestImage("reg/"+b.Module, i))
					img = &parsed
				}
				if _, err := l.Record(ctx, b.ID, img, "killed"); err != nil {
					return err
				}
			}
		}
	}
	return fmt.Errorf("unknown child mode %q", mode)
}

func child(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childModeVar+"="+mode, childDirVar+"="+dir)
	cmd.Stderr = os.Stderr
	return cmd
}

// startRecorder starts a child that records builds into the ledger at dir
// for ever, and returns it once it runs, for kill k to land in its writes.
func startRecorder(t *testing.T, dir string, k int) *exec.Cmd {
	t.Helper()
	cmd := child(t, "record-forever", dir)
	ready, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(ready).ReadString('\n'); err != nil {
		t.Fatalf("kill %d: the child did not start: %v", k, err)
	}
	return cmd
}

// TestConcurrentProcesses runs 8 processes that each request and record 25
// builds: 200 unique ids, in request order within each process, none lost,
// and the current build is the newest request, not the last record.
func TestConcurrentProcesses(t *testing.T) {
	l, d := newTestLedger(t)
	type run struct {
		cmd *exec.Cmd
		out strings.Builder
	}
	runs := make([]*run, 8)
	for i := range runs {
		r := &run{cmd: child(t, "request-record", d.Path())}
		r.cmd.Stdout = &r.out
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		runs[i] = r
	}
	images := map[string]string{}
	for i, r := range runs {
		if err := r.cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v", i, err)
		}
		var ids []string
		for line := range strings.Lines(r.out.String()) {
			id, img, _ := strings.Cut(strings.TrimSpace(line), " ")
			if _, dup := images[id]; dup {
				t.Errorf("id %s issued twice", id)
			}
			images[id] = img
			ids = append(ids, id)
		}
		// Printed in record order: the first build, then each pair newer first.
		for j := 1; j+1 < len(ids); j += 2 {
			if !(ids[j-1] < ids[j+1] && ids[j+1] < ids[j]) {
				t.Errorf("process %d: ids %s, %s, %s out of request order", i, ids[j-1], ids[j+1], ids[j])
			}
		}
	}
	if len(images) != 200 {
		t.Fatalf("%d ids, want 200", len(images))
	}
	list, err := l.List(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	var recorded []string
	for _, b := range list {
		if b.State == StatePending || images[b.ID] != b.Image {
			t.Errorf("build %s: %s with %q, want recorded with %q", b.ID, b.State, b.Image, images[b.ID])
		}
		recorded = append(recorded, b.ID)
	}
	if len(recorded) != 200 {
		t.Errorf("the ledger lists %d builds, want all 200", len(recorded))
	}
	newest := slices.Max(slices.Collect(func(yield func(string) bool) {
		for id := range images {
			if !yield(id) {
				return
			}
		}
	}))
	cur, ok, err := Current(d, "app")
	if err != nil || !ok || cur.ID != newest || cur.Image != images[newest] {
		t.Errorf("current %+v (%v, %v), want the newest request %s with %s", cur, ok, err, newest, images[newest])
	}
}

// TestKillDuringRecord SIGKILLs a process that requests and records in a
// loop, at random instants, and checks after each kill that every file of
// the ledger parses and that the ledger still works. MESHCTL_STRESS=1 kills
// it ten times as often.
func TestKillDuringRecord(t *testing.T) {
	kills := 50
	if os.Getenv("MESHCTL_STRESS") != "" {
		kills = 500
	}
	if testing.Short() {
		kills = 10
	}
	l, d := newTestLedger(t)
	l.Retain, l.ChunkSize = 3, 2
	l.LockTimeout = 10 * time.Second
	seed := time.Now().UnixNano()
	r := rand.New(rand.NewPCG(uint64(seed), 0))
	t.Logf("seed %d", seed)
	rec(t, l, request(t, l, "app").Builds[0].ID, "reg/app:0")
	for k := range kills {
		cmd := startRecorder(t, d.Path(), k)
		// Past its start, the child spends its time in the ledger's writes:
		// a random instant lands in one of them.
		time.Sleep(time.Duration(r.IntN(40000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: the child ended before the kill: %v", k, err)
		}
		checkWhole(t, d)
		if t.Failed() {
			t.Fatalf("after kill %d", k)
		}
	}
	// The ledger still works, and agrees with itself.
	list, err := l.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list {
		if b.State == StatePending {
			if _, err := l.Record(ctx, b.ID, nil, ""); err != nil {
				t.Errorf("record pending %s: %v", b.ID, err)
			}
		}
	}
	p := request(t, l, "app", "db")
	for _, b := range p.Builds {
		if got := rec(t, l, b.ID, "reg/x:1"); got.Outcome != OutcomeCurrent {
			t.Errorf("record after the kills: %s", got.Outcome)
		}
	}
	checkSettled(t, l, p.ID, true)
	for _, m := range []string{"app", "db"} {
		if cur, _, _ := Current(d, m); cur.ID != p.Builds[slices.Index([]string{"app", "db"}, m)].ID {
			t.Errorf("current %s is %s", m, cur.ID)
		}
	}
	var archived int
	for _, m := range []string{"app", "db"} {
		cat, err := readCatalog(d, m)
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range cat.Segments {
			archived += seg.Count
		}
	}
	t.Logf("%d kills; %d builds archived, %d listed (pending ones were cut short)", kills, archived, len(list))
}

// checkWhole parses every file of the ledger strictly, as the document its
// name says, and checks that each module's head and catalog name only files
// that exist.
func checkWhole(t *testing.T, d *state.Dir) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(d.Path(), subdir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // a temp file, not (yet) a ledger file
		}
		var doc state.Document
		switch {
		case name == "index.json":
			doc = &indexDoc{}
		case name == "plans.json":
			doc = &plansDoc{}
		case strings.HasSuffix(name, moduleSuffix):
			doc = &moduleDoc{}
		case strings.HasSuffix(name, ".archive.json"):
			doc = &catalogDoc{}
		case strings.Contains(name, ".chunk-"):
			doc = &chunkDoc{}
		case strings.Contains(name, ".archive-"):
			doc = &archiveDoc{}
		default:
			t.Errorf("unexpected file %s in the ledger", name)
			continue
		}
		if _, err := d.Read(subdir+"/"+name, doc); err != nil {
			t.Errorf("file %s: %v", name, err)
			continue
		}
		mod, ok := doc.(*moduleDoc)
		if !ok {
			continue
		}
		cat, err := readCatalog(d, mod.Module)
		if err != nil {
			t.Error(err)
			continue
		}
		if cat.FirstChunk > mod.NextChunk {
			t.Errorf("%s: catalog keeps chunks from %d, head has only %d", mod.Module, cat.FirstChunk, mod.NextChunk)
		}
		// Each recorded build is in one place only: the head, a kept chunk,
		// or an archive segment.
		seen := map[string]string{}
		once := func(id, where string) {
			if prev, dup := seen[id]; dup {
				t.Errorf("%s: build %s is in %s and in %s", mod.Module, id, prev, where)
			}
			seen[id] = where
		}
		for _, r := range mod.Recent {
			once(r.ID, "the head")
		}
		for n := cat.FirstChunk; n < mod.NextChunk; n++ {
			c, err := readChunk(d, mod.Module, n)
			if err != nil {
				t.Error(err)
				continue
			}
			for _, r := range c.Builds {
				once(r.ID, fmt.Sprintf("chunk %d", n))
			}
		}
		for _, seg := range cat.Segments {
			a, err := readArchive(d, mod.Module, seg.Seq)
			if err != nil {
				t.Error(err)
				continue
			}
			if len(a.Builds) != seg.Count {
				t.Errorf("%s segment %d: %d records, catalog says %d", mod.Module, seg.Seq, len(a.Builds), seg.Count)
			}
			for _, c := range a.Builds {
				once(c.ID, fmt.Sprintf("segment %d", seg.Seq))
			}
		}
	}
}
