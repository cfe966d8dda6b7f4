package state

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests use real processes, not goroutines: flock and rename are about
// processes, and a SIGKILL is only real for a process. The test binary runs
// itself as the child, in the mode named by $MESHCTL_STATE_CHILD.

func TestMain(m *testing.M) {
	switch os.Getenv("MESHCTL_STATE_CHILD") {
	case "increment":
		os.Exit(childIncrement())
	case "churn":
		os.Exit(childChurn())
	case "stall":
		os.Exit(childStall())
	}
	os.Exit(m.Run())
}

// childIncrement adds 1 to count.json, $N times, through Update.
func childIncrement() int {
	d, err := Open(os.Getenv("MESHCTL_STATE_DIR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv("N"))
	for i := 0; i < n; i++ {
		var c counter
		err := update(context.Background(), d, "count", "count.json", LockOptions{Timeout: time.Minute}, &c, func() error {
			c.N++
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

type payload struct {
	Header
	Seq  int    `json:"seq"`
	Data string `json:"data"`
	Sum  int    `json:"sum"`
}

// childChurn rewrites payload.json forever with documents of varying size,
// so that a kill lands mid-write often.
func childChurn() int {
	d, err := Open(os.Getenv("MESHCTL_STATE_DIR"))
	if err != nil {
		return 1
	}
	// Tell the parent the loop starts, so that its kill lands in the
	// writes and not in the process's start, however slow the machine.
	fmt.Println("writing")
	for seq := 0; ; seq++ {
		var p payload
		err := update(context.Background(), d, "churn", "payload.json", LockOptions{Timeout: time.Minute}, &p, func() error {
			size := 1 + rand.IntN(256<<10)
			p.Seq = seq
			p.Data = strings.Repeat("x", size)
			p.Sum = size
			return nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
}

func child(t *testing.T, mode, dir string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{"MESHCTL_STATE_CHILD=" + mode, "MESHCTL_STATE_DIR=" + dir}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// TestProcessesLoseNoUpdate: N processes each add 1, M times, through the
// mutation helper; the count must be N×M.
func TestProcessesLoseNoUpdate(t *testing.T) {
	const procs, each = 8, 50
	dir := filepath.Join(t.TempDir(), "state")
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := child(t, "increment", dir, "N="+strconv.Itoa(each)).Run(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d, _ := Open(dir)
	var c counter
	if _, err := d.Read("count.json", &c); err != nil {
		t.Fatal(err)
	}
	if c.N != procs*each {
		t.Fatalf("count = %d, want %d: updates were lost", c.N, procs*each)
	}
}

// TestKillNeverTearsAFile kills a writing child with SIGKILL at random
// instants, at least 200 times (MESHCTL_STRESS=1: 2000); after each kill the
// file is whole: it parses, and its content is consistent.
func TestKillNeverTearsAFile(t *testing.T) {
	kills := 200
	if os.Getenv("MESHCTL_STRESS") == "1" {
		kills = 2000
	}
	dir := filepath.Join(t.TempDir(), "state")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lastSeq, written := -1, 0
	for i := 0; i < kills; i++ {
		cmd := child(t, "churn", dir)
		cmd.Stderr = nil
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatalf("kill %d: the child did not start writing: %v", i, err)
		}
		time.Sleep(time.Duration(rand.IntN(8000)) * time.Microsecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		var p payload
		ok, err := d.Read("payload.json", &p)
		if err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		if !ok {
			if written > 0 {
				t.Fatalf("kill %d: the file vanished", i)
			}
			continue
		}
		written++
		if len(p.Data) != p.Sum || p.Sum == 0 {
			t.Fatalf("kill %d: torn document: %d bytes of data, sum %d", i, len(p.Data), p.Sum)
		}
		lastSeq = p.Seq
	}
	if written < kills/4 {
		t.Fatalf("only %d of %d kills found a written file (last seq %d): the child barely wrote", written, kills, lastSeq)
	}
	// Stale temps of killed writers are cleared by the next lock holder.
	l, err := d.Lock(context.Background(), "churn", LockOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file left: %s", e.Name())
		}
	}
}
