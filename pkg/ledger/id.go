package ledger

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Id prefixes. A build id reads "b-…", a plan id "p-…".
const (
	buildPrefix = "b-"
	planPrefix  = "p-"
)

// idLen is the length of an id's body, 128 bits in Crockford base32. The
// first character carries only 3 bits, as in a ULID.
const idLen = 26

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// seq is the 128-bit value of an id. It starts with 48 bits of Unix
// milliseconds. The next 80 bits are random when the clock has moved on, and
// count up when it has not. Its fixed-width base32 text sorts as its value
// does.
type seq struct{ hi, lo uint64 }

func (s seq) less(t seq) bool { return s.hi < t.hi || s.hi == t.hi && s.lo < t.lo }

func (s seq) inc() seq {
	s.lo++
	if s.lo == 0 {
		s.hi++
	}
	return s
}

// ms is the id's time in Unix milliseconds.
func (s seq) ms() int64 { return int64(s.hi >> 16) }

func (s seq) String() string {
	var b [idLen]byte
	hi, lo := s.hi, s.lo
	for i := idLen - 1; i >= 0; i-- {
		b[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(b[:])
}

func parseSeq(body string) (seq, bool) {
	if len(body) != idLen || body[0] > '7' {
		return seq{}, false
	}
	var s seq
	for i := 0; i < idLen; i++ {
		v := strings.IndexByte(crockford, body[i])
		if v < 0 {
			return seq{}, false
		}
		s.hi = s.hi<<5 | s.lo>>59
		s.lo = s.lo<<5 | uint64(v)
	}
	return s, true
}

// nextSeq issues the id after last at the time now. When the clock is past
// last, that is the clock's millisecond with fresh random low bits. Otherwise
// it is last+1. So ids increase strictly, even within one millisecond or when
// the clock steps back. They then carry the last issued time until the clock
// catches up.
func nextSeq(last seq, now time.Time, entropy io.Reader) (seq, error) {
	ms := now.UnixMilli()
	if ms < 0 || ms >= 1<<48 {
		return seq{}, fmt.Errorf("clock reads %s, outside what an id can carry", now)
	}
	if ms > last.ms() {
		var r [8]byte
		if _, err := io.ReadFull(entropy, r[:]); err != nil {
			return seq{}, fmt.Errorf("read randomness for an id: %w", err)
		}
		// 64 random bits under 80. The 16 zero bits above them leave room to
		// count up within the millisecond without ever touching the time.
		return seq{hi: uint64(ms) << 16, lo: binary.BigEndian.Uint64(r[:])}, nil
	}
	next := last.inc()
	if next.less(last) || next == (seq{}) {
		return seq{}, errors.New("build ids are exhausted")
	}
	return next, nil
}

// ParseID checks that id is a well-formed build ("b-…") or plan ("p-…") id.
// It returns the time the id carries. That is its request time, or a little
// later if the clock stepped back.
func ParseID(id string) (time.Time, error) {
	var body string
	switch {
	case strings.HasPrefix(id, buildPrefix):
		body = id[len(buildPrefix):]
	case strings.HasPrefix(id, planPrefix):
		body = id[len(planPrefix):]
	default:
		return time.Time{}, fmt.Errorf("%q is not a build or plan id (b-… or p-…)", id)
	}
	s, ok := parseSeq(body)
	if !ok {
		return time.Time{}, fmt.Errorf("%q is not a build or plan id: want %d base32 characters after the prefix", id, idLen)
	}
	return time.UnixMilli(s.ms()).UTC(), nil
}

var defaultEntropy io.Reader = rand.Reader

// The 80 bits after an etcd ledger's millisecond (clusterSeq).
const (
	revBits  = 40 // the cluster revision the issuing transaction read at
	idxBits  = 8  // the id's place among those one transaction issues
	randBits = 32 // random
)

// maxIDsPerTxn is how many ids one etcd transaction may issue. Each is at
// least one write, and etcd takes 128 operations per transaction by default.
const maxIDsPerTxn = 1 << idxBits

// clusterSeq issues the id of an etcd ledger after last. The id holds the
// millisecond max(now, last) and then rev, the cluster revision the issuing
// transaction read at. Then come i, the id's place in that transaction, and
// random bits. That may not be above last, as for an imported file ledger's
// id in the same millisecond. Then the millisecond after last's is taken
// instead.
//
// The revision makes ids unique forever, whatever the hosts' clocks. The
// transaction compares "last". So it read at a revision at or after the one
// that wrote last. That is above the revision the previous issuer read at. So
// two transactions that issue ids never read at the same revision. This holds
// in one history. It also holds across a snapshot restore that bumps the
// revision past every one the lost history reached (etcdutl snapshot restore
// --bump-revision). Without that bump, two ids coincide only if their 32
// random bits do too.
func clusterSeq(last seq, now time.Time, rev int64, i int, entropy io.Reader) (seq, error) {
	if rev <= 0 || rev >= 1<<revBits {
		return seq{}, fmt.Errorf("cluster revision %d is outside what an id can carry (1 to 2^%d)", rev, revBits)
	}
	if i < 0 || i >= maxIDsPerTxn {
		return seq{}, fmt.Errorf("id %d of one transaction: at most %d ids per transaction", i, maxIDsPerTxn)
	}
	var r [4]byte
	if _, err := io.ReadFull(entropy, r[:]); err != nil {
		return seq{}, fmt.Errorf("read randomness for an id: %w", err)
	}
	low := uint64(i)<<randBits | uint64(binary.BigEndian.Uint32(r[:]))
	at := func(ms int64) seq {
		// 80 bits, rev (40) | i (8) | random (32). The top 16 go into hi.
		return seq{hi: uint64(ms)<<16 | uint64(rev)>>24, lo: uint64(rev)<<40 | low}
	}
	ms := max(now.UnixMilli(), last.ms())
	if ms < 0 || ms >= 1<<48-1 {
		return seq{}, fmt.Errorf("clock reads %s, outside what an id can carry", now)
	}
	s := at(ms)
	if !last.less(s) {
		s = at(last.ms() + 1)
	}
	return s, nil
}
