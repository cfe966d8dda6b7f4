package ledger

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/meshctl/meshctl/pkg/fault"
	"github.com/meshctl/meshctl/pkg/state"
)

// The ledger's files. All live in the state directory's "ledger"
// subdirectory, and all change under the one lock "ledger". The package
// documentation says what each holds and why.
const (
	lockName  = "ledger"
	lockWhat  = "ledger lock"
	subdir    = "ledger"
	indexFile = subdir + "/index.json"
	plansFile = subdir + "/plans.json"

	moduleSuffix = ".module.json"
)

func moduleFile(m string) string { return subdir + "/" + m + moduleSuffix }

func chunkFile(m string, n int) string { return fmt.Sprintf("%s/%s.chunk-%d.json", subdir, m, n) }

func catalogFile(m string) string { return subdir + "/" + m + ".archive.json" }

func archiveFile(m string, seq int) string {
	return fmt.Sprintf("%s/%s.archive-%d.json", subdir, m, seq)
}

// The archive's shape. Chunks past retention are archived archiveBatch at a
// time, into one segment of level 0. So the catalog and a segment are written
// once in archiveBatch flushes. archiveFanout segments of one level merge
// into one of the next, up to maxArchiveLevel. Segments of that level no
// longer merge. They hold 5·20·8^3 = 51,200 records by default, about 7 MB.
// So no file nears the state package's 64 MiB limit.
const (
	archiveBatch    = 5
	archiveFanout   = 8
	maxArchiveLevel = 3
)

// indexDoc is ledger/index.json. It holds the last id issued and the builds
// not yet recorded. Record reads and writes it, so it holds nothing that
// grows with history.
type indexDoc struct {
	state.Header
	// Last is the body of the last id issued, build or plan. The next id is
	// issued after it.
	Last string `json:"last,omitempty"`
	// Pending maps each build id not yet recorded to its module and plan. A
	// crash may come between writing a module's file and this one. Right
	// after it, Pending may also hold that module's LastRecorded build. That
	// build counts as recorded, and the module's next record drops it.
	Pending map[string]pendingRec `json:"pending"`
}

type pendingRec struct {
	Module      string    `json:"module"`
	Plan        string    `json:"plan"`
	RequestedAt time.Time `json:"requested_at"`
}

// plansDoc is ledger/plans.json, which builds each recent plan asked for.
// Only requests write it. It keeps every plan with a pending build and the
// newest Retain settled ones. An older plan is found again from the plan ids
// its builds carry.
type plansDoc struct {
	state.Header
	Plans []planRec `json:"plans"` // in id order
}

type planRec struct {
	ID          string      `json:"id"`
	RequestedAt time.Time   `json:"requested_at"`
	Builds      []planBuild `json:"builds"`
}

type planBuild struct {
	ID     string `json:"id"`
	Module string `json:"module"`
}

// moduleDoc is ledger/MODULE.module.json, the head of one module's history.
// It holds the current build and the latest recorded builds. ChunkSize bounds
// its size whatever the history.
type moduleDoc struct {
	state.Header
	Module  string  `json:"module"`
	Current *record `json:"current,omitempty"`
	// LastRecorded is the id of the build recorded last. It recognises that
	// build in the index after a crash between the two writes of a record.
	LastRecorded string `json:"last_recorded,omitempty"`
	// Recent are the builds recorded since the last full chunk, in record
	// order. At ChunkSize they move to a chunk file.
	Recent []record `json:"recent"`
	// NextChunk numbers the next chunk file. The catalog's FirstChunk …
	// NextChunk-1 hold the older retained builds.
	NextChunk int `json:"next_chunk"`
}

// catalogDoc is ledger/MODULE.archive.json. It says which chunks are
// archived, and lists the archive's segments. Only flushes read and write it.
// So the head stays the same size whatever the history.
type catalogDoc struct {
	state.Header
	Module string `json:"module"`
	// FirstChunk is the oldest chunk kept. Those before it are archived.
	FirstChunk int `json:"first_chunk"`
	// Segments lists the archive's segments. NextSegment numbers the next.
	Segments    []segmentInfo `json:"segments"`
	NextSegment int           `json:"next_segment"`
}

// segmentInfo describes one archive file. A segment of level L holds
// ChunkSize·8^L compact records, sorted by id, First to Last.
type segmentInfo struct {
	Seq   int    `json:"seq"`
	Level int    `json:"level"`
	Count int    `json:"count"`
	First string `json:"first"`
	Last  string `json:"last"`
}

// record is one recorded build, in full.
type record struct {
	ID          string    `json:"id"`
	Plan        string    `json:"plan"`
	RequestedAt time.Time `json:"requested_at"`
	FinishedAt  time.Time `json:"finished_at"`
	// Image is the image recorded. It is empty for a failed build.
	Image   string  `json:"image,omitempty"`
	Reason  string  `json:"reason,omitempty"`
	Outcome Outcome `json:"outcome"`
}

// chunkDoc is ledger/MODULE.chunk-N.json, ChunkSize retained builds written
// once.
type chunkDoc struct {
	state.Header
	Module string   `json:"module"`
	Seq    int      `json:"seq"`
	Builds []record `json:"builds"`
}

// archiveDoc is ledger/MODULE.archive-N.json, a segment of the archive. It
// holds compact records of pruned builds, written once.
type archiveDoc struct {
	state.Header
	Module string    `json:"module"`
	Seq    int       `json:"seq"`
	Level  int       `json:"level"`
	Builds []compact `json:"builds"` // sorted by id
}

// compact is what is left of a pruned build. It says the build existed, which
// plan it belonged to and what its record's outcome was. It also tells
// whether a new record of it is the same result.
type compact struct {
	ID   string `json:"i"`
	Plan string `json:"p"`
	// Outcome is the outcome its record printed: c(urrent), s(uperseded) or f(ailed).
	Outcome string `json:"o"`
	// Result is resultHash of its normalized image, or of "failed".
	Result string `json:"r"`
}

func (r record) failed() bool { return r.Image == "" }

// resultKey is the normalized image of r, or "failed".
func (r record) resultKey() string {
	if r.failed() {
		return resultFailed
	}
	if img, err := ParseImage(r.Image); err == nil {
		return img.Normalized
	}
	return r.Image
}

func (r record) compact() compact {
	return compact{ID: r.ID, Plan: r.Plan, Outcome: string(r.Outcome[:1]), Result: resultHash(r.resultKey())}
}

func (c compact) outcome() Outcome {
	switch c.Outcome {
	case "c":
		return OutcomeCurrent
	case "s":
		return OutcomeSuperseded
	default:
		return OutcomeFailed
	}
}

// reader reads ledger files. It is a *state.Lock, or a *state.Dir for a
// lock-free snapshot of one file.
type reader interface {
	Read(name string, doc state.Document) (bool, error)
}

// checkNamed refuses a module name that a ledger file gave, before it becomes
// part of a path. A file that names an invalid module is damaged.
func checkNamed(m string) error {
	if CheckModule(m) != nil {
		return fault.New(fault.Failed, "the ledger names module %q, which is not a valid module name; the ledger is damaged", m)
	}
	return nil
}

func readModule(r reader, m string) (*moduleDoc, error) {
	if err := checkNamed(m); err != nil {
		return nil, err
	}
	doc := &moduleDoc{Module: m}
	if _, err := r.Read(moduleFile(m), doc); err != nil {
		return nil, err
	}
	if doc.Module != m {
		return nil, fault.New(fault.Failed, "ledger file %s names module %q; the ledger of module %s is damaged", moduleFile(m), doc.Module, m)
	}
	return doc, nil
}

func readCatalog(r reader, m string) (*catalogDoc, error) {
	if err := checkNamed(m); err != nil {
		return nil, err
	}
	doc := &catalogDoc{Module: m}
	if _, err := r.Read(catalogFile(m), doc); err != nil {
		return nil, err
	}
	if doc.Module != m {
		return nil, fault.New(fault.Failed, "ledger file %s names module %q; the ledger of module %s is damaged", catalogFile(m), doc.Module, m)
	}
	return doc, nil
}

func readChunk(r reader, m string, n int) (*chunkDoc, error) {
	if err := checkNamed(m); err != nil {
		return nil, err
	}
	doc := &chunkDoc{}
	ok, err := r.Read(chunkFile(m, n), doc)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.New(fault.Failed, "ledger file %s is missing; the ledger of module %s is damaged", chunkFile(m, n), m)
	}
	return doc, nil
}

func readArchive(r reader, m string, seq int) (*archiveDoc, error) {
	if err := checkNamed(m); err != nil {
		return nil, err
	}
	doc := &archiveDoc{}
	ok, err := r.Read(archiveFile(m, seq), doc)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fault.New(fault.Failed, "ledger file %s is missing; the ledger of module %s is damaged", archiveFile(m, seq), m)
	}
	return doc, nil
}

// found is a recorded build located in a module's history. It is in full, or
// only its compact record once pruned.
type found struct {
	module string
	full   *record
	pruned *compact
}

func (f found) outcome() Outcome {
	if f.full != nil {
		return f.full.Outcome
	}
	return f.pruned.outcome()
}

func (f found) failed() bool {
	if f.full != nil {
		return f.full.failed()
	}
	return f.pruned.Outcome == "f"
}

// sameResult reports whether key is the result f was recorded with. key is a
// normalized image or "failed".
func (f found) sameResult(key string) bool {
	if f.full != nil {
		return f.full.resultKey() == key
	}
	return f.pruned.Result == resultHash(key)
}

// describe names f's result for a conflict message.
func (f found) describe() string {
	switch {
	case f.failed():
		return resultFailed
	case f.full != nil:
		return "image " + f.full.Image
	default:
		return "another image (pruned: only its digest is kept)"
	}
}

// lookup finds the recorded build id in module m's history. It looks in the
// head, then the kept chunks, then the archive segments whose range holds it.
func lookup(r reader, mod *moduleDoc, id string) (found, bool, error) {
	if mod.Current != nil && mod.Current.ID == id {
		c := *mod.Current
		return found{module: mod.Module, full: &c}, true, nil
	}
	for i := range mod.Recent {
		if mod.Recent[i].ID == id {
			return found{module: mod.Module, full: &mod.Recent[i]}, true, nil
		}
	}
	cat, err := readCatalog(r, mod.Module)
	if err != nil {
		return found{}, false, err
	}
	for n := mod.NextChunk - 1; n >= cat.FirstChunk; n-- {
		c, err := readChunk(r, mod.Module, n)
		if err != nil {
			return found{}, false, err
		}
		for i := range c.Builds {
			if c.Builds[i].ID == id {
				return found{module: mod.Module, full: &c.Builds[i]}, true, nil
			}
		}
	}
	for _, seg := range cat.Segments {
		if id < seg.First || id > seg.Last {
			continue
		}
		a, err := readArchive(r, mod.Module, seg.Seq)
		if err != nil {
			return found{}, false, err
		}
		i := sort.Search(len(a.Builds), func(i int) bool { return a.Builds[i].ID >= id })
		if i < len(a.Builds) && a.Builds[i].ID == id {
			return found{module: mod.Module, pruned: &a.Builds[i]}, true, nil
		}
	}
	return found{}, false, nil
}

// modules lists the modules with a ledger file.
func modules(d *state.Dir) ([]string, error) {
	names, err := d.List(subdir, moduleSuffix)
	if err != nil {
		return nil, err
	}
	var ms []string
	for _, n := range names {
		ms = append(ms, strings.TrimSuffix(n, moduleSuffix))
	}
	return ms, nil
}

// writeChunk moves mod.Recent into a new chunk file. The caller then writes
// mod, which makes the chunk part of the ledger.
func writeChunk(lk *state.Lock, mod *moduleDoc) error {
	if err := lk.Write(chunkFile(mod.Module, mod.NextChunk), &chunkDoc{Module: mod.Module, Seq: mod.NextChunk, Builds: mod.Recent}); err != nil {
		return err
	}
	mod.NextChunk++
	mod.Recent = []record{}
	return nil
}

// archive moves the chunks of mod past retention into the archive. It waits
// until archiveBatch of them are, then writes them as one segment of level 0.
// When a level has archiveFanout segments, they merge into one of the next
// level. So a module keeps at most 7 segments per level below
// maxArchiveLevel. Each compact record is rewritten about
// log8(history/(archiveBatch·ChunkSize)) times in all.
//
// archive runs after mod is written. The catalog, written last, makes the new
// segment part of the ledger. Killed before, the chunks are still kept and
// the next flush archives them. Then archive removes the files neither mod
// nor the catalog names.
func (l *Ledger) archive(lk *state.Lock, mod *moduleDoc) error {
	m := mod.Module
	cat, err := readCatalog(lk, m)
	if err != nil {
		return err
	}
	keep := (l.retain() + l.chunkSize() - 1) / l.chunkSize()
	if mod.NextChunk-cat.FirstChunk >= keep+archiveBatch {
		var carry []compact
		for n := cat.FirstChunk; n < mod.NextChunk-keep; n++ {
			c, err := readChunk(lk, m, n)
			if err != nil {
				return err
			}
			for _, r := range c.Builds {
				carry = append(carry, r.compact())
			}
		}
		sort.Slice(carry, func(i, j int) bool { return carry[i].ID < carry[j].ID })
		level := 0
		for {
			var same, others []segmentInfo
			for _, seg := range cat.Segments {
				if seg.Level == level {
					same = append(same, seg)
				} else {
					others = append(others, seg)
				}
			}
			if len(same)+1 < archiveFanout || level == maxArchiveLevel {
				break
			}
			for _, seg := range same {
				a, err := readArchive(lk, m, seg.Seq)
				if err != nil {
					return err
				}
				carry = mergeCompact(carry, a.Builds)
			}
			cat.Segments = others
			level++
		}
		seq := cat.NextSegment
		if len(carry) > 0 {
			if err := lk.Write(archiveFile(m, seq), &archiveDoc{Module: m, Seq: seq, Level: level, Builds: carry}); err != nil {
				return err
			}
			cat.NextSegment++
			cat.Segments = append(cat.Segments, segmentInfo{Seq: seq, Level: level, Count: len(carry), First: carry[0].ID, Last: carry[len(carry)-1].ID})
		}
		cat.FirstChunk = mod.NextChunk - keep
		if err := lk.Write(catalogFile(m), cat); err != nil {
			return err
		}
	}
	return cleanup(lk, mod, cat)
}

func mergeCompact(a, b []compact) []compact {
	out := make([]compact, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].ID < b[0].ID {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// cleanup removes the chunk and archive files of a module that its head and
// catalog no longer name. Those are the files a flush archived or merged, and
// any a kill left behind.
func cleanup(lk *state.Lock, mod *moduleDoc, cat *catalogDoc) error {
	names, err := lk.Dir().List(subdir, ".json")
	if err != nil {
		return err
	}
	segments := map[int]bool{}
	for _, seg := range cat.Segments {
		segments[seg.Seq] = true
	}
	var errs []error
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, mod.Module+".")
		if !ok {
			continue
		}
		rest = strings.TrimSuffix(rest, ".json")
		var stale bool
		if s, ok := strings.CutPrefix(rest, "chunk-"); ok {
			n, err := strconv.Atoi(s)
			stale = err == nil && (n < cat.FirstChunk || n >= mod.NextChunk)
		} else if s, ok := strings.CutPrefix(rest, "archive-"); ok {
			n, err := strconv.Atoi(s)
			stale = err == nil && !segments[n]
		}
		if stale {
			errs = append(errs, lk.Remove(subdir+"/"+name))
		}
	}
	return errors.Join(errs...)
}

// build is f as a Build, given its module's current build.
func (f found) build(cur *record) Build {
	if f.full != nil {
		return toBuild(f.module, *f.full, cur)
	}
	return prunedBuild(f.module, *f.pruned, cur)
}
