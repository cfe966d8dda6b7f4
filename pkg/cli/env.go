package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/engine"
	"github.com/meshctl/meshctl/pkg/state"
)

// Global holds the global flags of CONTRACT §2, after the config file and
// MESHCTL_* variables have been folded in.
type Global struct {
	StateDir    string
	Config      string
	DockerHost  string
	LockTimeout time.Duration
	Output      string
	Quiet       bool
	Verbose     bool
	// Ledger is --ledger, "file" or etcd://…. LedgerCA, LedgerCert and
	// LedgerKey are its TLS files. Its user and password come only from
	// MESHCTL_LEDGER_USER and MESHCTL_LEDGER_PASSWORD (see ledger.go).
	Ledger     string
	LedgerCA   string
	LedgerCert string
	LedgerKey  string
	// HostName names this host in the mesh (default os.Hostname).
	HostName string
	// MetricsFile is where the metrics for node_exporter's textfile
	// collector go. An empty MetricsFile writes none.
	MetricsFile string
}

// Env is everything a command needs from the outside world. It is built once
// per invocation by Main, and by tests with their own writers, clock and
// engine factory.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Log    *slog.Logger
	Now    func() time.Time
	// NewEngine connects to the engine at host. An empty host means
	// DOCKER_HOST, else the engine's default socket.
	NewEngine func(host string) (engine.Client, error)
	Global    Global
	// StderrTTY says that stderr is a terminal (StderrFd). Progress is
	// then shown live, with lines updated in place.
	StderrTTY bool
	StderrFd  uintptr

	progress *progress
	stateDir *state.Dir
	peekDir  *state.Dir
	// jsonResult is the document PrintJSON was given, written by Run.
	jsonResult []byte
	// args are the arguments Run was given, for a helper program that
	// carries out the command (runHelper).
	args []string
	// preRun says that the root's pre-run began. MESHCTL_* and the config
	// file were folded into the global flags, or failed to be.
	preRun bool
}

// NewEnv returns the Env of a real invocation.
func NewEnv(stdin io.Reader, stdout, stderr io.Writer) *Env {
	return &Env{
		Stdin:     stdin,
		Stdout:    stdout,
		Stderr:    stderr,
		Log:       slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Now:       time.Now,
		NewEngine: engine.New,
	}
}

// State opens (creating it if needed) and checks the state directory.
func (e *Env) State() (*state.Dir, error) {
	if e.stateDir == nil {
		d, err := state.Open(e.Global.StateDir)
		if err != nil {
			return nil, err
		}
		e.stateDir = d
		e.Log.Debug("state dir", "path", d.Path())
	}
	return e.stateDir, nil
}

// StateReadOnly checks the state directory for the commands that must
// change nothing, such as status and apply --dry-run. It creates neither
// the directory nor anything in it. A missing directory reads as empty
// (Dir.Exists). A missing one is looked for again at the next call: the
// command may have made it since, as an apply does after its decode.
func (e *Env) StateReadOnly() (*state.Dir, error) {
	if e.peekDir == nil || !e.peekDir.Exists() {
		d, err := state.Peek(e.Global.StateDir)
		if err != nil {
			return nil, err
		}
		e.peekDir = d
		e.Log.Debug("state dir (read-only)", "path", d.Path(), "exists", d.Exists())
	}
	return e.peekDir, nil
}

// Engine connects to the configured Docker engine. An address that cannot
// be one, such as a scheme the engine does not speak or no host, is a
// usage error.
func (e *Env) Engine() (engine.Client, error) {
	host := e.Global.DockerHost
	from := "--docker-host"
	if host == "" {
		host, from = os.Getenv("DOCKER_HOST"), "DOCKER_HOST"
	}
	if host != "" {
		scheme, rest, ok := strings.Cut(host, "://")
		if !ok || rest == "" || !slices.Contains([]string{"unix", "tcp", "http", "https", "npipe"}, scheme) {
			return nil, &UsageError{Err: fmt.Errorf("%s %q is not a Docker engine address: use unix:///path/to/docker.sock or tcp://HOST:PORT", from, host)}
		}
	}
	c, err := e.NewEngine(e.Global.DockerHost)
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	e.Log.Debug("engine", "host", c.Host())
	return c, nil
}

// StateAndEngine opens the state directory and connects to the engine, for
// the commands that need both. The caller closes the engine.
func (e *Env) StateAndEngine() (*state.Dir, engine.Client, error) {
	return e.openStateAndEngine(e.State)
}

// StateReadOnlyAndEngine is StateAndEngine for a command that changes
// nothing. It opens the state directory read-only (StateReadOnly).
func (e *Env) StateReadOnlyAndEngine() (*state.Dir, engine.Client, error) {
	return e.openStateAndEngine(e.StateReadOnly)
}

// openStateAndEngine opens the state directory with open, then connects to
// the engine.
func (e *Env) openStateAndEngine(open func() (*state.Dir, error)) (*state.Dir, engine.Client, error) {
	d, err := open()
	if err != nil {
		return nil, nil, err
	}
	c, err := e.Engine()
	if err != nil {
		return nil, nil, err
	}
	return d, c, nil
}

// LockOptions returns how long to wait for a lock, per --lock-timeout.
func (e *Env) LockOptions(what string) state.LockOptions {
	return state.LockOptions{Timeout: e.Global.LockTimeout, What: what,
		Waiting: func(what string, h state.Holder) {
			e.Progressf("waiting for the %s held by %s\n", what, h)
		}}
}

// JSON reports whether -o json was asked for.
func (e *Env) JSON() bool { return e.Global.Output == "json" }

// PrintJSON makes v the command's one JSON document. Run writes it on
// stdout when the command returns, with the error in it if it failed.
func (e *Env) PrintJSON(v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return err
	}
	e.jsonResult = b
	return nil
}

// Printf writes a result line on stdout, unless -q.
func (e *Env) Printf(format string, args ...any) {
	if !e.Global.Quiet {
		fmt.Fprintf(e.Stdout, format, args...)
	}
}

// Progressf writes a progress line on stderr, unless -q.
func (e *Env) Progressf(format string, args ...any) {
	e.Progress().Linef(format, args...)
}

// Progress is this invocation's progress on stderr. It is plain lines, or
// on a terminal, lines updated in place (see progress).
func (e *Env) Progress() *progress {
	if e.progress == nil {
		e.progress = newProgress(e.Stderr, e.StderrFd, e.StderrTTY, e.Global.Quiet)
	}
	return e.progress
}

// StatusFunc is, on a terminal, what shows an item's progress on a line of
// its own, updated in place. It is nil when progress is plain lines.
func (e *Env) StatusFunc() func(id, msg string) {
	if p := e.Progress(); p.Live() {
		return p.Status
	}
	return nil
}

// closeProgress ends the live progress, before the result and errors.
func (e *Env) closeProgress() {
	if e.progress != nil {
		e.progress.Close()
	}
}

// Warnf writes a warning on stderr, even with -q. A warning is something
// the operator should act on. On a terminal with live progress it goes
// through the progress renderer, above the lines it updates in place. So
// no update overwrites it.
func (e *Env) Warnf(format string, args ...any) {
	msg := fmt.Sprintf("warning: "+format, args...)
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	if e.progress != nil && e.progress.Live() {
		e.progress.Linef("%s", msg)
		return
	}
	fmt.Fprint(e.Stderr, msg)
}
