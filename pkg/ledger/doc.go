// Package ledger keeps the ledger of image builds per module, so that which
// build is a module's current artifact follows when builds were requested,
// not which builder was slowest (CONTRACT §7).
//
// # The rule
//
// Every build is requested first ("build request"), which issues its id,
// and recorded once finished ("build record"), with an image or as failed.
// A module's current artifact is replaced only by a successful build
// requested at or after the one it came from (Decide). So a record is
// current (it became the module's artifact), superseded (a build requested
// later is already current; recorded, changes nothing), or failed (never
// current). Rolling back on purpose is a new request recorded with the old
// image: it obeys the same rule, and wins because it was requested last.
// The same result recorded again is idempotent and returns the first
// outcome; another result (another image, or an image after a failure, or
// the reverse) is a *ConflictError and changes nothing. A failure's reason
// is not part of its result.
//
// # Ids
//
// Ids are issued under the ledger lock from max(now, last issued)+1, in one
// sequence for builds ("b-…") and plans ("p-…"): 48 bits of Unix
// milliseconds and 80 bits that are random when the clock has moved past the
// last id and count up from it when it has not (same millisecond, or a clock
// that stepped back). They are 26 Crockford base32 characters after the
// prefix, so their text order is their numeric order is the order of
// requests, across processes. An id carries its request time, or the last
// issued time while the clock catches up after stepping back.
//
// # Plans
//
// One "build request A B …" forms one plan: a plan id, then one build id per
// module. "--plan ID" adds builds to a plan that an earlier request opened,
// so that a pipeline can ask for its builds in several steps; an unknown
// plan is refused. A plan is settled once every build it asked for is
// recorded, whatever the outcome; only its own builds settle it.
//
// # Stores
//
// The rule above is written once, in ledger.go, over a small storage
// interface (storage.go): a view finds builds, plans and a module's current
// build; a txn also issues ids, adds pending builds and plans, and stores a
// record with the outcome the Ledger decided. A store never decides. There
// are two: the state directory's files (fileStore, below), the default, and
// etcd (etcdStore, OpenEtcd), which a mesh of hosts and CI share.
//
// On etcd, everything lives under PREFIX/ledger/ (see etcdStore). Each
// request and record is one transaction that compares the mod revision of
// every key it read; one that loses its compare (another host wrote first)
// reads again and is judged again. Ids come from the cluster: a request
// compares the last id issued, so ids follow the cluster's order of
// requests; a host's clock gives an id only the time it carries, and the
// id's next 40 bits are the cluster revision the transaction read at (then
// its place in the transaction, then 32 random bits: clusterSeq), so no two
// transactions issue the same id whatever the clocks. Restored from a
// snapshot or imported, the ledger's last id is data like the rest, so ids
// go on after it; a restore with --bump-revision past the lost history's
// revisions never issues an id that was lost with it. The etcd client
// does not retry a write whose answer it lost; meshctl does, and each
// request and record carries an idempotency key whose answer is written in
// the same transaction: run again, it finds that answer and changes
// nothing. Answers live a day under a lease, which the cluster counts, so
// no host's clock forgets another's answer early. Current reads are
// linearizable (one read-only transaction, never serializable or at a past
// revision). Retention is the same: each
// record past Retain builds of its module prunes the oldest (never the
// current one) to its compact record, which still judges a record again.
//
// Export and Import move a ledger between stores as JSON lines (export.go).
// Into etcd, an import writes a marker first (importing) and removes it,
// with last, in its last transaction: every operation reads the marker and
// refuses the ledger while it is there, so a half-written import is never
// used, and the same import run again finishes it.
//
// # Storage in files
//
// Everything lives in the state directory's subdirectory "ledger", and every
// change is made under one OS lock, "ledger". Files are replaced atomically
// (package state), so each one is always whole; the order of writes below
// makes every prefix of an operation, cut by a kill -9, a consistent ledger.
//
//   - index.json: the last id issued, and the pending builds: build id →
//     module, plan, request time. A build stays here until it is recorded,
//     however old, so a build recorded late always finds its module and is
//     judged by the rule (superseded if a later one is current) — never
//     unknown. Its size is the number of builds in flight, not the history;
//     a build whose builder died stays pending until it is recorded (record
//     it --failed to close it).
//   - plans.json: the builds each plan asked for. Only requests write it;
//     it keeps the plans with a pending build and the newest Retain settled
//     ones. An older plan is found again from the plan id its builds carry.
//   - MODULE.module.json, the module's head: its current build in full, the
//     id recorded last, the builds recorded since the last chunk (fewer than
//     ChunkSize), and the number of the next chunk. Its size does not depend
//     on the history.
//   - MODULE.chunk-N.json: ChunkSize recorded builds in full, written once.
//     The newest ceil(Retain/ChunkSize) chunks are kept, and older ones are
//     archived five at a time: so at least Retain (and fewer than
//     Retain+6·ChunkSize) builds of each module are kept in full, plus its
//     current build, plus all pending builds.
//   - MODULE.archive.json, the module's catalog: the first chunk kept (older
//     ones are archived), and the archive's segments with their id ranges.
//   - MODULE.archive-N.json: a segment of the archive, written once:
//     compact records of pruned builds (id, plan, outcome, a hash of the
//     result), sorted by id. Five chunks leaving retention become a segment
//     of level 0; eight segments of a level merge into one of the next, so a
//     level-L segment holds 5·ChunkSize·8^L records, a module has at most 7
//     segments per level (18 files for 100,000 builds), and a pruned build
//     is rewritten about log8(history/(5·ChunkSize)) times in all. Segments
//     of level 3 (51,200 records, about 7 MB) no longer merge, so no file
//     nears the 64 MiB a state file may have: past 400,000 builds a module
//     gets one more file per 51,200.
//
// So "build record" of a pending build reads and writes the index and the
// module's head, both of a size bounded whatever the history. One record in
// ChunkSize also flushes: it writes a chunk, and one flush in five archives
// the chunks leaving retention (reading them, writing a segment, merging
// segments now and then, and writing the catalog: amortised, a few hundred
// bytes per record at 100,000 builds). Recording a build that was recorded
// before (a retry), or an unknown id at or below the last one issued, looks
// it up in every module's head, kept chunks and the catalog's segments whose
// range holds it: the rare path.
//
// A record writes any new chunk, then the module's head, then the index,
// then (when it flushed) the archive segments and the catalog, and last
// removes the files neither head nor catalog names any more. Killed after
// the head, the build is recorded but still in the index; the head's
// last-recorded id says so, every reader treats it as recorded, and the
// module's next record drops it from the index. Killed before the catalog,
// the chunk is still kept, and the next flush archives it; a segment no
// catalog names is removed then. A request writes the index (which issues
// the ids) before plans.json. Killed between the two, its builds are pending
// in the index only: a plan counts the pending builds that name it, so it
// does not read settled, and the plan's next request writes plans.json
// whole. Settled is computed, never stored, and a plan with no build is not
// settled.
//
// Readers: Current reads only the module's head, a lock-free snapshot, for
// apply. List and Plan read several files and so take the lock.
package ledger
