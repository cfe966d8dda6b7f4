package harness

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/meshctl/meshctl/internal/faultproxy"
)

// The short run draws its doors from a file, not from a calibration: a
// scenario's first run without faults, which records the calls it makes,
// takes seconds for each scenario. MESHCTL_FAULTS_RECORD=1 calibrates
// every scenario again and rewrites the file.

// doorsFile holds, per scenario, the calls its act made without faults,
// "METHOD ROUTE" each, in order.
const doorsFile = "testdata/doors.json"

// doorsRefresh says how to write doorsFile again.
const doorsRefresh = "MESHCTL_FAULTS_RECORD=1 MESHCTL_FAULTS_FIXED=0 go test -count=1 ./internal/harness -run TestFaults"

// recording reports whether this run rewrites doorsFile.
func recording() bool { return os.Getenv("MESHCTL_FAULTS_RECORD") == "1" }

// loadDoors reads doorsFile into the rig's calls: the scenarios it names
// need no calibration.
// calibratesAlways names the scenarios whose calls depend on the instant
// a file is broken at. Their recorded doors went stale from run to run, and
// a stale list costs a calibration and a second run: they calibrate.
var calibratesAlways = map[string]bool{"files-vanish-apply": true, "window-deferred-files": true}

func (g *faultRig) loadDoors() {
	doors, err := readDoors()
	if err != nil {
		g.t.Logf("%s: %v: every scenario calibrates", doorsFile, err)
		return
	}
	for name, list := range doors {
		if calibratesAlways[name] {
			continue
		}
		var calls []faultproxy.Call
		for i, s := range list {
			method, route, _ := strings.Cut(s, " ")
			// At tells calls apart for nth; its value means nothing.
			calls = append(calls, faultproxy.Call{Method: method, Route: route, At: time.Unix(0, int64(i+1))})
		}
		g.calls[name] = calls
		g.recorded[name] = true
	}
}

func readDoors() (map[string][]string, error) {
	b, err := os.ReadFile(doorsFile)
	if err != nil {
		return nil, err
	}
	doors := map[string][]string{}
	if err := json.Unmarshal(b, &doors); err != nil {
		return nil, err
	}
	return doors, nil
}

// saveDoors writes the doors this run calibrated into doorsFile, beside
// those of the scenarios it did not run.
func (g *faultRig) saveDoors() {
	doors, err := readDoors()
	if errors.Is(err, fs.ErrNotExist) {
		doors, err = map[string][]string{}, nil
	}
	if err != nil {
		g.t.Fatalf("%s: %v", doorsFile, err)
	}
	for name, calls := range g.calls {
		if g.recorded[name] || calibratesAlways[name] {
			continue
		}
		var list []string
		for _, c := range calls {
			list = append(list, c.Method+" "+c.Route)
		}
		doors[name] = list
	}
	b, err := json.MarshalIndent(doors, "", "  ")
	if err != nil {
		g.t.Fatal(err)
	}
	if err := os.WriteFile(doorsFile, append(b, '\n'), 0o644); err != nil {
		g.t.Fatal(err)
	}
	g.t.Logf("wrote the doors of %d scenario(s) to %s", len(g.calls), doorsFile)
}
