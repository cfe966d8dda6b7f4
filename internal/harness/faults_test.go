package harness

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshctl/meshctl/internal/eventcheck"
	"github.com/meshctl/meshctl/internal/faultproxy"
	"github.com/meshctl/meshctl/internal/meshrun"
)

// TestFaults is the fault harness: it drives apply, window run (run: and
// exec: steps), a close with a deferred change, stale release and status
// through a fault-injecting proxy in front of the test engine, sends
// signals at random instants, and after every run checks from the
// engine's own event stream (not meshctl's report) that no held container
// ran while its step ran, that no two copies of a service ran at once, and
// that one apply without faults heals the host to the file.
//
// The suite's short run takes every scenario of faultScenarios once, one
// fault per run, at any door, of each class in turn, and holds on today's
// code. It draws the doors from testdata/doors.json (faults_doors_test.go);
// the long mode, a scenario the file lacks, and one whose drawn door never
// came first run once without faults, which records the calls its faults
// are drawn from. MESHCTL_FAULTS_RECORD=1 rewrites the file. MESHCTL_FAULTS=N runs N iterations,
// each a scenario and up to three faults of its own (give go test
// -timeout accordingly); MESHCTL_FAULTS_SEED=S sets the seed (default: 1
// in the short run, else the clock); MESHCTL_FAULTS_SCENARIO=NAME[,NAME]
// runs only those. The seed is printed on every failure; iteration i of seed S draws from S+i.
// MESHCTL_FAULTS_KNOWN=1 replays the known findings instead
// (knownFindings): each fails until its bug is fixed; the fixed ones
// (fixedFindings) run first in every other run, as regression tests,
// unless MESHCTL_FAULTS_FIXED=0 (to replay one iteration quickly).
func TestFaults(t *testing.T) {
	if os.Getenv("MESHCTL_FAULTS_KNOWN") == "1" {
		testKnownFindings(t)
		return
	}
	host := meshrun.TestEngine(t)
	seed, iterations := faultsConfig(t)
	scenarios := selectScenarios(t)
	rig := newFaultRig(t, host)
	defer rig.report()
	if os.Getenv("MESHCTL_FAULTS") != "" {
		rig.faults, rig.long = 3, true
	}
	if recording() {
		defer rig.saveDoors()
	} else if !rig.long {
		rig.loadDoors()
	}
	if os.Getenv("MESHCTL_FAULTS_FIXED") != "0" {
		testFixedFindings(t, rig)
	}
	for i := range iterations {
		sc := scenarios[i%len(scenarios)]
		if iterations > len(scenarios) {
			sc = scenarios[rand.New(rand.NewPCG(seed+uint64(i), 0)).IntN(len(scenarios))]
		}
		s := seed + uint64(i)
		if rig.needsCalibration(sc) {
			t.Run(fmt.Sprintf("%03d-%s-calibrate", i, sc.name), func(t *testing.T) {
				rig.iterate(t, sc, s)
			})
		}
		ok := t.Run(fmt.Sprintf("%03d-%s", i, sc.name), func(t *testing.T) {
			rig.iterate(t, sc, s)
		})
		if rig.long && (i+1)%25 == 0 {
			rig.report()
		}
		if !ok {
			t.Logf("reproduce: MESHCTL_FAULTS_SEED=%d MESHCTL_FAULTS=1 MESHCTL_FAULTS_SCENARIO=%s (iteration %d of seed %d)", s, sc.name, i, seed)
		}
	}
}

// selectScenarios returns the scenarios MESHCTL_FAULTS_SCENARIO names, or
// all of them.
func selectScenarios(t *testing.T) []fltScenario {
	names := os.Getenv("MESHCTL_FAULTS_SCENARIO")
	if names == "" {
		return faultScenarios
	}
	var out []fltScenario
	for _, sc := range faultScenarios {
		if slices.Contains(strings.Split(names, ","), sc.name) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		t.Fatalf("MESHCTL_FAULTS_SCENARIO=%q names no scenario", names)
	}
	return out
}

// faultsConfig reads the seed and the number of iterations.
func faultsConfig(t *testing.T) (seed uint64, iterations int) {
	t.Helper()
	seed, iterations = 1, len(faultScenarios)
	if s := os.Getenv("MESHCTL_FAULTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("MESHCTL_FAULTS=%q: want a positive number", s)
		}
		iterations, seed = n, uint64(time.Now().UnixNano()%1e6)
	}
	if s := os.Getenv("MESHCTL_FAULTS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("MESHCTL_FAULTS_SEED=%q: want a number", s)
		}
		seed = n
	}
	t.Logf("MESHCTL_FAULTS_SEED=%d, %d iteration(s)", seed, iterations)
	return seed, iterations
}

// faultRig is what every iteration shares: meshctl against the test
// engine, the proxy in front of it, and the record of the engine's events.
type faultRig struct {
	t     *testing.T
	host  string
	m     *meshctl
	proxy *faultproxy.Proxy
	rec   *eventcheck.Recorder
	// calls keeps, per scenario, the calls its act made without faults:
	// the doors a seed picks from.
	calls map[string][]faultproxy.Call
	// recorded names the scenarios whose calls come from doorsFile.
	recorded map[string]bool
	faults   int  // the most faults an iteration draws
	long     bool // MESHCTL_FAULTS: the long mode
	cycled   int  // the short run's faulted iterations so far
	// slowestEnd is the longest a command took to end after the signal
	// that asked it to.
	slowestEnd time.Duration
	signals    map[string]int
	runs       int
}

// fltPrefix starts the name of every module and container of these tests.
const fltPrefix = "flt"

func newFaultRig(t *testing.T, host string) *faultRig {
	t.Helper()
	m := newMeshctl(t, host)
	// A unix socket path is limited to 107 bytes: keep it short.
	sock := filepath.Join(os.TempDir(), fmt.Sprintf("flt-%d-%08x.sock", os.Getpid(), rand.Uint32()))
	p, err := faultproxy.Start(sock, host, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	rec, err := eventcheck.Record(t.Context(), host, func(name string, labels map[string]string) bool {
		return strings.HasPrefix(name, fltPrefix) || strings.HasPrefix(labels["io.meshctl.module"], fltPrefix)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Stop)
	return &faultRig{t: t, host: host, m: m, proxy: p, rec: rec, faults: 1,
		calls: map[string][]faultproxy.Call{}, recorded: map[string]bool{}, signals: map[string]int{}}
}

// report logs how many faults of each class, and signals of each kind,
// the run injected.
func (g *faultRig) report() {
	counts := g.proxy.Counts()
	var parts []string
	for _, c := range faultproxy.Classes {
		parts = append(parts, fmt.Sprintf("%s=%d", c, counts[c]))
	}
	var sigs []string
	for s, n := range g.signals {
		sigs = append(sigs, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(sigs)
	g.t.Logf("%d iteration(s), %d engine calls through the proxy; faults: %s; signals: %s; slowest end after a signal: %s",
		g.runs, len(g.proxy.Calls()), strings.Join(parts, " "), strings.Join(sigs, " "), g.slowestEnd.Round(time.Millisecond))
}
