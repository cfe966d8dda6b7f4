package harness

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/meshctl/meshctl/pkg/coord"
)

// setupTinyState gives the run a meshctl of its own whose state directory
// is on a 512 KiB tmpfs, and applies version 1 there. It needs root (the
// mount); without it the run is skipped.
func setupTinyState(r *fltRun) {
	if os.Geteuid() != 0 {
		r.t.Skip("a tmpfs state directory needs root")
	}
	mnt := filepath.Join(r.dir, "statefs")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		r.t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512k,mode=0700", "tmpfs", mnt).CombinedOutput(); err != nil {
		r.t.Skipf("mount a tmpfs: %v: %s", err, out)
	}
	r.t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	m := *r.g.m
	m.State = filepath.Join(mnt, "state")
	m.Env = slices.DeleteFunc(slices.Clone(m.Env), func(kv string) bool { return strings.HasPrefix(kv, "MESHCTL_STATE_DIR=") })
	m.Env = append(m.Env, "MESHCTL_STATE_DIR="+m.State)
	r.m = &m
	r.applied(r.ver)
}

// actFullState fills the state directory's file system to a drawn few KiB
// short of full, then runs a window and an apply that changes the service:
// writes fail (ENOSPC) wherever they land. Then the space comes back: the
// healing apply must converge, and every state file must be whole.
func actFullState(r *fltRun) {
	filler := filepath.Join(filepath.Dir(r.m.State), "filler")
	r.fill(filler, int64(r.rng.IntN(24<<10)))
	r.windows = append(r.windows, fltWindow{step: "gcx", exec: true})
	res := r.run(false, "window", "run", r.module, "gcx", "-f", r.file, "--settle", "1s")
	r.t.Logf("window run on a full state dir: %s\n%s", res.describe(), res.stderr)
	v := r.ver
	v.Version = "2"
	r.writeMesh(v)
	res = r.run(false, "apply", "-f", r.file, "--settle", "1s")
	r.t.Logf("apply on a full state dir: %s\n%s%s", res.describe(), res.stdout, res.stderr)
	if err := os.Remove(filler); err != nil {
		r.t.Fatal(err)
	}
	r.want = "2"
	r.checkStateFiles()
}

// fill writes a file that leaves only left bytes free on path's file
// system.
func (r *fltRun) fill(path string, left int64) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(path), &st); err != nil {
		r.t.Fatal(err)
	}
	size := int64(st.Bavail)*st.Bsize - left
	f, err := os.Create(path)
	if err != nil {
		r.t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for ; size > 0; size -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), size)]); err != nil {
			return // full already
		}
	}
}

// checkStateFiles checks that every JSON file of the state directory is
// whole: it parses, with its file's version.
func (r *fltRun) checkStateFiles() {
	err := filepath.WalkDir(r.m.State, func(p string, e os.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json") {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var v struct {
			Version int `json:"version"`
		}
		if err := json.Unmarshal(data, &v); err != nil || v.Version != stateVersion(p) {
			r.t.Errorf("state file %s is not whole: version %d, %v", p, v.Version, err)
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
}

// stateVersion is the version meshctl writes the state file at path
// with: holds.json has its own, every other file 1.
func stateVersion(path string) int {
	if filepath.Base(path) == coord.HoldsFile {
		return coord.HoldsVersion
	}
	return 1
}
