package ledger

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
)

// A ledger moves between stores as JSON lines (Export, Import). A header
// comes first, {"kind":"ledger","version":1,"last":…}, with the last id
// issued. Then come the plans and builds in id order, which is request order.
//
//	{"kind":"plan","id":"p-…","requested_at":…,"builds":[{"id":"b-…","module":"app"}]}
//	{"kind":"build","id":"b-…","module":"app","plan":"p-…","requested_at":…,
//	 "finished_at":…,"image":"…","outcome":"current"}
//
// A pending build has no outcome. A pruned build of a file ledger keeps only
// its outcome and the digest of its result ("pruned": true, "result"). Ids,
// order, plans and outcomes are kept as they are. An import decides nothing
// again.

// ExportVersion is the version of the export format.
const ExportVersion = 1

type exportLine struct {
	Kind        string      `json:"kind"`
	Version     int         `json:"version,omitempty"`
	Last        string      `json:"last,omitempty"`
	ID          string      `json:"id,omitempty"`
	Module      string      `json:"module,omitempty"`
	Plan        string      `json:"plan,omitempty"`
	RequestedAt *time.Time  `json:"requested_at,omitempty"`
	FinishedAt  *time.Time  `json:"finished_at,omitempty"`
	Image       string      `json:"image,omitempty"`
	Reason      string      `json:"reason,omitempty"`
	Outcome     Outcome     `json:"outcome,omitempty"`
	Pruned      bool        `json:"pruned,omitempty"`
	Result      string      `json:"result,omitempty"`
	Builds      []planBuild `json:"builds,omitempty"`
}

// dump is a whole ledger, as a store gives it and takes it.
type dump struct {
	last   string // body of the last id issued
	builds []dumpBuild
	plans  []planRec
}

// dumpBuild is one build. It is pending when neither record nor pruned is
// set. Otherwise it is recorded in full, or pruned to its compact record.
type dumpBuild struct {
	id, module string
	pending    pendingRec
	record     *record
	pruned     *compact
}

func tptr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// plansOf rebuilds every plan from the plan ids its builds carry. known gives
// the request time of the plans a store still lists.
func plansOf(builds []dumpBuild, known map[string]time.Time) []planRec {
	byID := map[string]*planRec{}
	var out []*planRec
	for _, b := range builds {
		p := b.pending.Plan
		if p == "" {
			continue
		}
		pr, ok := byID[p]
		if !ok {
			pr = &planRec{ID: p, RequestedAt: known[p]}
			if pr.RequestedAt.IsZero() {
				pr.RequestedAt, _ = ParseID(p)
			}
			byID[p] = pr
			out = append(out, pr)
		}
		pr.Builds = append(pr.Builds, planBuild{ID: b.id, Module: b.module})
	}
	res := make([]planRec, len(out))
	for i, p := range out {
		sort.Slice(p.Builds, func(i, j int) bool { return p.Builds[i].ID < p.Builds[j].ID })
		res[i] = *p
	}
	return res
}

// Export writes the whole ledger to w as JSON lines, from one consistent
// snapshot.
func (l *Ledger) Export(ctx context.Context, w io.Writer) (builds int, err error) {
	d, err := l.store().dump(ctx)
	if err != nil {
		return 0, err
	}
	var lines []exportLine
	for _, p := range d.plans {
		lines = append(lines, exportLine{Kind: "plan", ID: p.ID, RequestedAt: tptr(p.RequestedAt), Builds: p.Builds})
	}
	for _, b := range d.builds {
		ln := exportLine{Kind: "build", ID: b.id, Module: b.module, Plan: b.pending.Plan, RequestedAt: tptr(b.pending.RequestedAt)}
		switch {
		case b.record != nil:
			ln.FinishedAt, ln.Image, ln.Reason, ln.Outcome = tptr(b.record.FinishedAt), b.record.Image, b.record.Reason, b.record.Outcome
		case b.pruned != nil:
			ln.Pruned, ln.Outcome, ln.Result = true, b.pruned.outcome(), b.pruned.Result
		}
		lines = append(lines, ln)
	}
	// Id order is request order. A plan's id comes before its builds'.
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].ID[2:] < lines[j].ID[2:] })
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(exportLine{Kind: "ledger", Version: ExportVersion, Last: d.last}); err != nil {
		return 0, err
	}
	for _, ln := range lines {
		if err := enc.Encode(ln); err != nil {
			return 0, err
		}
	}
	return len(d.builds), bw.Flush()
}

// notEmpty refuses an import into a ledger that has issued ids (exit 2).
func notEmpty(where string) error {
	return fault.New(fault.BadInput, "ledger %s is not empty; import only into a new ledger (another --ledger, or an etcd prefix nobody uses)", where)
}

// badImport reports line n of an export that does not read (exit 2).
func badImport(n int, err error) error {
	return fault.New(fault.BadInput, "import line %d: %v", n, err)
}

// Import reads an Export from r into this ledger, which must be empty. It
// keeps the same ids, order, plans and outcomes.
func (l *Ledger) Import(ctx context.Context, r io.Reader) (builds int, err error) {
	d, err := readDump(r)
	if err != nil {
		return 0, err
	}
	if err := l.store().load(ctx, d); err != nil {
		return 0, err
	}
	return len(d.builds), nil
}

func readDump(r io.Reader) (*dump, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	d := &dump{}
	n := 0
	header := false
	seen := map[string]bool{}
	for sc.Scan() {
		n++
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var ln exportLine
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ln); err != nil {
			return nil, badImport(n, err)
		}
		bad := func(format string, args ...any) error { return badImport(n, fmt.Errorf(format, args...)) }
		if !header {
			if ln.Kind != "ledger" || ln.Version != ExportVersion {
				return nil, bad("want the header {\"kind\":\"ledger\",\"version\":%d,…} first: is this a meshctl build export?", ExportVersion)
			}
			if _, ok := parseSeq(ln.Last); ln.Last != "" && !ok {
				return nil, bad("malformed last id %q", ln.Last)
			}
			d.last, header = ln.Last, true
			continue
		}
		if seen[ln.ID] {
			return nil, bad("%s appears twice", ln.ID)
		}
		seen[ln.ID] = true
		switch ln.Kind {
		case "plan":
			if err := checkID(ln.ID, planPrefix, "plan"); err != nil {
				return nil, bad("%v", err)
			}
			p := planRec{ID: ln.ID, Builds: ln.Builds}
			if ln.RequestedAt != nil {
				p.RequestedAt = *ln.RequestedAt
			}
			d.plans = append(d.plans, p)
		case "build":
			if err := checkID(ln.ID, buildPrefix, "build"); err != nil {
				return nil, bad("%v", err)
			}
			if err := CheckModule(ln.Module); err != nil {
				return nil, bad("%v", err)
			}
			if ln.ID[2:] > d.last {
				return nil, bad("%s is after the last id issued, %s", ln.ID, d.last)
			}
			b := dumpBuild{id: ln.ID, module: ln.Module, pending: pendingRec{Module: ln.Module, Plan: ln.Plan}}
			if ln.RequestedAt != nil {
				b.pending.RequestedAt = *ln.RequestedAt
			}
			switch {
			case ln.Pruned:
				c := record{ID: ln.ID, Plan: ln.Plan, Outcome: ln.Outcome}.compact()
				c.Result = ln.Result
				b.pruned = &c
			case ln.Outcome != "":
				switch ln.Outcome {
				case OutcomeCurrent, OutcomeSuperseded, OutcomeFailed:
				default:
					return nil, bad("unknown outcome %q", ln.Outcome)
				}
				if (ln.Image == "") != (ln.Outcome == OutcomeFailed) {
					return nil, bad("build %s: outcome %s with image %q", ln.ID, ln.Outcome, ln.Image)
				}
				rec := record{ID: ln.ID, Plan: ln.Plan, RequestedAt: b.pending.RequestedAt, Image: ln.Image, Reason: ln.Reason, Outcome: ln.Outcome}
				if ln.FinishedAt != nil {
					rec.FinishedAt = *ln.FinishedAt
				}
				b.record = &rec
			}
			d.builds = append(d.builds, b)
		default:
			return nil, bad("unknown kind %q", ln.Kind)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !header {
		return nil, badImport(n, errors.New("empty: no ledger header"))
	}
	sort.Slice(d.builds, func(i, j int) bool { return d.builds[i].id < d.builds[j].id })
	return d, nil
}
