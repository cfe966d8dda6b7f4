// Package ledger keeps the ledger of image builds per module. Which build is
// a module's current artifact follows when builds were requested, not which
// builder was slowest (CONTRACT §7).
//
// # The rule
//
// Every build is requested first ("build request"), which issues its id. It
// is recorded once finished ("build record"), with an image or as failed.
// Only a successful build requested at or after the current one replaces a
// module's current artifact (Decide). So a record is current, superseded or
// failed. A current record became the module's artifact. A superseded one
// changes nothing, since a build requested later is already current. A
// failed one is never current. Rolling back on purpose is a new request recorded
// with the old image. It obeys the same rule, and wins because it was
// requested last.
//
// The same result recorded again is idempotent and returns the first outcome.
// Another result is a *ConflictError and changes nothing. That is another
// image, an image after a failure, or the reverse. A failure's reason is not
// part of its result.
//
// # Ids
//
// Ids are issued under the ledger lock from max(now, last issued)+1. Builds
// ("b-…") and plans ("p-…") share one sequence. An id holds 48 bits of Unix
// milliseconds and 80 more bits. Those are random when the clock has moved
// past the last id. Otherwise they count up from it, as in the same
// millisecond or after a clock stepped back. An id is 26 Crockford base32
// characters after the prefix. So the text order of ids is their numeric
// order, and the order of requests across processes. An id carries its
// request time. While the clock catches up after stepping back, it carries
// the last issued time instead.
//
// # Plans
//
// One "build request A B …" forms one plan. It issues a plan id, then one
// build id per module. "--plan ID" adds builds to a plan an earlier request
// opened. So a pipeline can ask for its builds in several steps. An unknown
// plan is refused. A plan is settled once every build it asked for is
// recorded, whatever the outcome. Only its own builds settle it.
//
// # Stores
//
// The rule above is written once, in ledger.go, over a small storage
// interface (storage.go). A view finds builds, plans and a module's current
// build. A txn also issues ids, adds pending builds and plans, and stores
// records. The outcome of a record is the Ledger's to decide, never the
// store's. There are two stores. The default is the state directory's files
// (fileStore, below). The other is etcd (etcdStore, OpenEtcd), which a mesh
// of hosts and CI share. A build with the tag noetcd has no etcd client, and
// so only the files (noetcd.go).
//
// On etcd, everything lives under PREFIX/ledger/ (see etcdStore). Each
// request and record is one transaction. It compares the mod revision of
// every key it read. One that loses its compare reads again and is judged
// again. That happens when another host wrote first.
//
// Ids come from the cluster. A request compares the last id issued, so ids
// follow the cluster's order of requests. A host's clock gives an id only the
// time it carries. The id's next 40 bits are the cluster revision the
// transaction read at. Then come its place in the transaction and 32 random
// bits (clusterSeq). So no two transactions issue the same id, whatever the
// clocks. Restored from a snapshot or imported, the last id is data like the
// rest, so ids go on after it. A restore with --bump-revision past the lost
// history's revisions never issues an id that was lost with it.
//
// The etcd client does not retry a write whose answer it lost. meshctl does.
// Each request and record carries an idempotency key. Its answer is written
// in the same transaction. Run again, the operation finds that answer and
// changes nothing. Answers live a day under a lease, which the cluster
// counts. So no host's clock forgets another's answer early. Current reads
// are linearizable. They are one read-only transaction, never serializable or
// at a past revision. Retention is the same as in files. Each record past
// Retain builds of its module prunes the oldest to its compact record. The
// current build is never pruned. A compact record still judges a record
// again.
//
// Export and Import move a ledger between stores as JSON lines (export.go).
// An import into etcd writes a marker first ("importing"). Its last
// transaction removes the marker and writes last. Every operation reads the
// marker and refuses the ledger while it is there. So a half-written import
// is never used, and the same import run again finishes it.
//
// # Storage in files
//
// Everything lives in the state directory's subdirectory "ledger". Every
// change is made under one OS lock, "ledger". Files are replaced atomically
// (package state), so each one is always whole. The order of writes below
// keeps every prefix of an operation a consistent ledger. So a kill -9 at any
// point leaves one.
//
//   - index.json holds the last id issued and the pending builds. Each pending
//     build maps to its module, plan and request time. A build stays here
//     until it is recorded, however old. So a build recorded late always finds
//     its module and is judged by the rule, never unknown. It is superseded if
//     a later one is current. The file's size is the number of builds in
//     flight, not the history. A build whose builder died stays pending until
//     it is recorded. Record it --failed to close it.
//   - plans.json holds the builds each plan asked for. Only requests write it.
//     It keeps the plans with a pending build and the newest Retain settled
//     ones. An older plan is found again from the plan id its builds carry.
//   - MODULE.module.json is the module's head. It holds its current build in
//     full, the id recorded last, and the number of the next chunk. It also
//     holds the builds recorded since the last chunk, fewer than ChunkSize.
//     Its size does not depend on the history.
//   - MODULE.chunk-N.json holds ChunkSize recorded builds in full. It is
//     written once. The newest ceil(Retain/ChunkSize) chunks are kept. Older
//     ones are archived five at a time. So each module keeps at least Retain
//     builds in full, and fewer than Retain+6·ChunkSize. It also keeps its
//     current build and all pending builds.
//   - MODULE.archive.json is the module's catalog. It names the first chunk
//     kept, since older ones are archived. It lists the archive's segments
//     with their id ranges.
//   - MODULE.archive-N.json is a segment of the archive, written once. It
//     holds compact records of pruned builds, sorted by id. A compact record
//     is the id, plan, outcome and a hash of the result. Five chunks leaving
//     retention become a segment of level 0. Eight segments of a level merge
//     into one of the next. So a level-L segment holds 5·ChunkSize·8^L
//     records. A module has at most 7 segments per level, 18 files for
//     100,000 builds. A pruned build is rewritten about
//     log8(history/(5·ChunkSize)) times in all. Segments of level 3 no longer
//     merge. They hold 51,200 records, about 7 MB. So no file nears the 64 MiB
//     a state file may have. Past 400,000 builds a module gets one more file
//     per 51,200.
//
// So "build record" of a pending build reads and writes the index and the
// module's head. Both have a size bounded whatever the history. One record in
// ChunkSize also flushes, which writes a chunk. One flush in five archives
// the chunks leaving retention. It reads them, writes a segment, merges
// segments now and then, and writes the catalog. Amortised, that is a few
// hundred bytes per record at 100,000 builds. A retry of a record takes the
// rare path, as does an unknown id at or below the last one issued. That
// looks the id up in every module's head, in its
// kept chunks, and in the catalog's segments whose range holds it.
//
// A record writes any new chunk, then the module's head, then the index. When
// it flushed, it then writes the archive segments and the catalog. Last, it
// removes the files neither head nor catalog names any more. Killed after the
// head, the build is recorded but still in the index. The head's
// last-recorded id says so, and every reader treats the build as recorded.
// The module's next record drops it from the index. Killed before the
// catalog, the chunk is still kept, and the next flush archives it. A segment
// no catalog names is removed then.
//
// A request writes the index, which issues the ids, before plans.json. Killed
// between the two, its builds are pending in the index only. A plan counts
// the pending builds that name it, so it does not read settled. The plan's
// next request writes plans.json whole. Settled is computed, never stored. A
// plan with no build is not settled.
//
// Readers: Current reads only the module's head, a lock-free snapshot, for
// apply. List and Plan read several files and so take the lock.
package ledger
