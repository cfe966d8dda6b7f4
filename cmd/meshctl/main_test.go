package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/meshctl/meshctl/internal/meshrun"
	"github.com/meshctl/meshctl/pkg/cli"
	"github.com/meshctl/meshctl/pkg/convert"
	"github.com/meshctl/meshctl/pkg/window"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the scripts run meshctl as a real process: "exec meshctl …"
// runs this test binary as meshctl, and as meshctl-convert (its main's
// body), which meshctl convert runs from PATH. A window's exec: step runs
// it as the step's guard too.
func TestMain(m *testing.M) {
	window.MaybeStepGuard()
	testscript.Main(m, map[string]func(){
		"meshctl": func() { os.Exit(cli.Main()) },
		"on":      func() { os.Exit(onMain()) },
		"meshctl-convert": func() {
			cli.Converter = convert.Project
			os.Exit(cli.Main())
		},
		// meshctl with the etcd client, as the release's meshctl (built
		// with -tags noetcd) runs it: TestReleaseMeshctlHandsEtcdOver.
		"meshctl-etcd": func() { os.Exit(cli.Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Set MESHCTL_UPDATE_SCRIPTS=1 to
// rewrite their golden stdout/stderr files.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("MESHCTL_UPDATE_SCRIPTS") == "1",
		Setup:               setup,
		Condition:           condition,
		Cmds:                scriptCmds(),
	})
}

// setup gives each script its own HOME, XDG dirs and state dir under $WORK,
// and points meshctl at the test engine (never the host's default one).
func setup(env *testscript.Env) error {
	work := env.WorkDir
	for k, v := range map[string]string{
		"HOME":              filepath.Join(work, "home"),
		"XDG_CONFIG_HOME":   filepath.Join(work, "home", ".config"),
		"XDG_STATE_HOME":    filepath.Join(work, "home", ".local", "state"),
		"XDG_CACHE_HOME":    filepath.Join(work, "home", ".cache"),
		"MESHCTL_STATE_DIR": filepath.Join(work, "state"),
	} {
		env.Setenv(k, v)
	}
	host := os.Getenv("MESHCTL_TEST_DOCKER_HOST")
	if host == "" {
		// Nothing must reach a real engine by accident: point at nowhere.
		host = "unix://" + filepath.Join(work, "no-engine.sock")
	}
	env.Setenv("DOCKER_HOST", host)
	env.Setenv("MESHCTL_TEST_DOCKER_HOST", host)
	env.Setenv("CI", os.Getenv("CI"))
	// REPO lets a script run the project's own scripts (scripts/engine.sh).
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return err
	}
	env.Setenv("REPO", repo)
	// ENGDIR is where a script may start a private engine of its own (kept
	// short: a unix socket path is limited to 107 bytes). Whatever runs
	// there is stopped when the script ends.
	engdir := filepath.Join(os.TempDir(), fmt.Sprintf("mcs-%d-%d", os.Getpid(), engineSeq.Add(1)))
	env.Setenv("ENGDIR", engdir)
	env.Defer(func() {
		if _, err := os.Stat(filepath.Join(engdir, "dockerd.pid")); err == nil {
			cmd := exec.Command(filepath.Join(repo, "scripts", "engine.sh"), "stop")
			cmd.Env = append(os.Environ(), "MESHCTL_ENGINE_DIR="+engdir, "MESHCTL_TEST_DOCKER_HOST=unix://"+engdir+"/docker.sock")
			_ = cmd.Run()
		}
		_ = os.RemoveAll(engdir)
	})
	return nil
}

// engineSeq numbers the scripts' own engine directories.
var engineSeq atomic.Int64

var (
	engineOnce sync.Once
	engineErr  error
)

// condition knows [engine] (the test engine answers) and [root]; any other
// name is an error, not a silent false.
func condition(cond string) (bool, error) {
	switch cond {
	case "engine":
		engineOnce.Do(func() { engineErr = meshrun.PingTestEngine() })
		if engineErr != nil && os.Getenv("CI") == "true" {
			return false, fmt.Errorf("CI=true and the test engine does not answer: %v", engineErr)
		}
		return engineErr == nil, nil
	case "root":
		return os.Geteuid() == 0, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}
