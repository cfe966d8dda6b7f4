/*
 * ledger-etcd.pml: the build ledger kept in etcd (pkg/ledger/etcdstore.go),
 * at the granularity of its transactions, for spin.
 *
 * The cluster is a set of keys, each with the revision that last wrote it
 * (0: absent), and one revision counter. A transaction reads at one
 * revision (one atomic step: the reads of etcdTx at t.rev), decides, and
 * commits in one atomic step iff the mod revision of every key it read is
 * unchanged (the compares of etcdTx.commit) and its read revision is not
 * compacted (the commit's read at t.rev); a lost compare reads again. A
 * commit's answer may be lost in flight (LOST times in all): the host runs
 * the operation again under the same idempotency key, whose answer the
 * first commit wrote.
 *
 * NH hosts (3) each request one build of module m (ledger.Request: the
 * answer key, "last", a b/ID key written) and record it with their own
 * image (ledger.Record: b/ID and the head compared). Their clocks differ:
 * host 0 runs ahead (CLOCK0), the others behind. An id is the time
 * max(clock, last's) and the revision the transaction read at
 * (clusterSeq), as one number ms*R + rev; if that is not above last, the
 * millisecond after last's.
 *
 * A restorer takes a snapshot at any moment and later restores the cluster
 * from it, bumping the revision by BUMP and marking every revision before
 * that compacted (etcdutl snapshot restore --bump-revision
 * --mark-compacted). With -DIMPORT, an importer writes an exported ledger
 * into the empty prefix instead: marker, builds, head, then last with the
 * marker removed; every transaction reads the marker and refuses while it
 * is there.
 *
 * Properties (assertions):
 *   - ids are unique forever: no committed request issues an id any
 *     request issued before, lost ones (restore) included;
 *   - ids follow request order: a request that began after another ended
 *     (since the last restore) gets a larger id;
 *   - a lost answer never records twice: each request commits once (in
 *     the history since the last restore: a commit the restore lost is
 *     undone, and the retry commits it again);
 *   - current follows request order: the head never moves to an older
 *     build;
 *   - one record per build, with its own image: a record writes the build
 *     its host requested, never another's with the same id;
 *   - an import is never seen half done: no id is issued while one is
 *     partly written;
 *   - no deadlock (invalid end states).
 *
 * Variants, for scripts/model (each must make a property fail):
 *   BROKEN_CLOCK_IDS        ids from the clock alone: last+1 when the clock
 *                           is not past last (the code before ids were safe
 *                           across a restore):
 *                           after a restore, a lost id is issued again
 *   BROKEN_NO_BUMP          the restore does not bump the revision: the same
 *   BROKEN_NO_COMPACT_CHECK a commit does not read at its read revision:
 *                           a transaction that read before the restore
 *                           commits after it, and issues the id that a
 *                           transaction which read at the same revision
 *                           issued and the restore lost
 *   BROKEN_NO_LAST_COMPARE  a request does not compare last: two hosts issue
 *                           after the same last, and the later commit moves
 *                           it back
 *   BROKEN_NO_IDEMPOTENCY   a retry after a lost answer runs under a new key:
 *                           the request commits twice
 *   BROKEN_NO_HEAD_COMPARE  a record does not compare the head: a late
 *                           record of an older build moves it back
 *   BROKEN_IMPORT_NO_MARKER (with IMPORT) the import writes no marker (the
 *                           code before that fix): ids are issued while it
 *                           is half written
 */

#ifndef NH
#define NH 3
#endif
#ifndef LOST
#define LOST 1
#endif
#define R 256        /* an id: ms*R + the revision its transaction read at */
#define BUMP 100     /* the restore's --bump-revision; every revision < R */
#define CLOCK0 3     /* host 0's clock (ms), ahead */
#define CLOCK 1      /* the other hosts' clocks */
#define NS 4         /* b/ID slots: NH builds and one imported */
#define IMP_ID 513   /* the imported build's id (2*R+1), and the imported last */
#define NOBODY 9     /* the owner of the imported build */

/* the cluster: values, and the revision that wrote each (0: absent) */
int rev;
int compacted;      /* reads below it fail (etcdutl --mark-compacted) */
int last; int last_mr;
int head; int head_mr;
int sid[NS]; byte sown[NS]; byte srec[NS]; int smr[NS];  /* b/ID: id, requester+1, image (0: pending) */
int ans[NH]; int ans_mr[NH];                             /* answer/KEY of each host's request */
int ans2[NH];                                            /* the keys of BROKEN_NO_IDEMPOTENCY's retries */
bool importing; int imp_mr;

/* the snapshot */
int s_rev, s_last, s_last_mr, s_head, s_head_mr;
int s_sid[NS]; byte s_sown[NS]; byte s_srec[NS]; int s_smr[NS];
int s_ans[NH]; int s_ans_mr[NH];

/* ghosts */
int issued[2*NH]; byte nissued;  /* every id a request committed, never restored */
byte commits[NH];                /* commits of each host's request */
int done_max;                    /* the largest id a finished request got, since the last restore */
byte epoch;                      /* restores so far */
byte lost = LOST;                /* answers the network may still lose */
bool imp_started, imp_done;

/* code: etcdTx.issue → clusterSeq (or nextSeq, BROKEN_CLOCK_IDS) */
inline newid(clock, r) {
#ifdef BROKEN_CLOCK_IDS
	if
	:: clock > rlast / R -> id = clock * R + 10 + r  /* random low bits, distinct per request */
	:: else -> id = rlast + 1
	fi
#else
	ms = clock;
	if
	:: rlast / R > ms -> ms = rlast / R
	:: else
	fi;
	id = ms * R + rrev;
	if
	:: id <= rlast -> id = (rlast / R + 1) * R + rrev
	:: else
	fi
#endif
}

inline slotof(x) {
	s = 0;
	do
	:: s < NS && sid[s] != x -> s++
	:: else -> break
	od
}

proctype host(byte r; int clock) {
	int rrev, rlast, rlast_mr, ranswer, ranswer_mr, id, ms, floor, rhead, rhead_mr, rbmr;
	byte s, fepoch, k;
	bool imp, ok;
	d_step { floor = done_max; fepoch = epoch; k = r };
	/* code: ledger.Request under once(): read, decide, commit with compares */
request: skip;
	d_step {
		rrev = rev; rlast = last; rlast_mr = last_mr; imp = importing;
#ifdef BROKEN_NO_IDEMPOTENCY
		if
		:: k == r -> ranswer = ans[r]
		:: else -> ranswer = ans2[r]
		fi;
#else
		ranswer = ans[r];
#endif
		ranswer_mr = ans_mr[r];
		id = ranswer;
		if
		:: !imp && ranswer == 0 -> newid(clock, r)
		:: else
		fi
	};
	if
	:: imp -> goto end          /* exit 1, being imported */
	:: !imp && ranswer != 0 -> goto requested
	:: else
	fi;
	d_step {
		ok = rrev >= compacted && !importing && ans_mr[r] == ranswer_mr;
#ifdef BROKEN_NO_IDEMPOTENCY
		ok = rrev >= compacted && !importing;
#endif
#ifndef BROKEN_NO_LAST_COMPARE
		ok = ok && last_mr == rlast_mr;
#endif
		if
		:: ok ->
			assert(!(imp_started && !imp_done));     /* no id while an import is half written */
			s = 0;
			do
			:: s < nissued -> assert(issued[s] != id); s++   /* ids unique forever */
			:: else -> break
			od;
			issued[nissued] = id; nissued++;
			commits[r]++;
			assert(commits[r] <= 1);                 /* a lost answer never records twice */
			assert(fepoch != epoch || id > floor);   /* ids follow request order */
			rev++;
			last = id; last_mr = rev;
			s = 0;
			do
			:: s < NS - 1 && sid[s] != 0 -> s++
			:: else -> break
			od;
			sid[s] = id; sown[s] = r + 1; srec[s] = 0; smr[s] = rev;
#ifdef BROKEN_NO_IDEMPOTENCY
			if
			:: k == r -> ans[r] = id; ans_mr[r] = rev
			:: else -> ans2[r] = id
			fi
#else
			ans[r] = id; ans_mr[r] = rev
#endif
		:: else
		fi
	};
	if
	:: !ok -> goto request                   /* lost its compare: read again */
	:: ok && lost > 0 -> lost--;             /* the answer lost in flight: run again */
#ifdef BROKEN_NO_IDEMPOTENCY
		k = NH + r;                          /* under a new key */
#endif
		goto request
	:: ok
	fi;
requested: skip;
	d_step {
		if
		:: fepoch == epoch && id > done_max -> done_max = id
		:: else
		fi
	};
#ifdef NOREC
	goto end;
#endif
	/* code: ledger.Record of its build with its own image */
record: skip;
	d_step {
		rrev = rev; rhead = head; rhead_mr = head_mr; imp = importing;
		slotof(id);
		rbmr = 0;
		if
		:: s < NS -> rbmr = smr[s]
		:: else
		fi
	};
	if
	:: imp -> goto end                       /* exit 1, being imported */
	:: !imp && s == NS -> goto end           /* unknown: lost with a restore (exit 2) */
	:: !imp && s < NS && srec[s] != 0 -> goto end   /* recorded already: again */
	:: else
	fi;
	d_step {
		ok = rrev >= compacted && !importing && sid[s] == id && smr[s] == rbmr;
#ifndef BROKEN_NO_HEAD_COMPARE
		ok = ok && head_mr == rhead_mr;
#endif
		if
		:: ok ->
			assert(sown[s] == r + 1);          /* one record per build, with its own image */
			rev++;
			srec[s] = r + 1; smr[s] = rev;
			if
			:: id >= rhead ->                  /* Decide: current */
				assert(id >= head);            /* the head never moves back */
				head = id; head_mr = rev
			:: else                            /* superseded */
			fi
		:: else
		fi
	};
	if
	:: !ok -> goto record
	:: else
	fi;
end:
	skip
}

#ifndef IMPORT
/* etcdctl snapshot save, then etcdutl snapshot restore of it, later */
proctype restorer() {
	byte i;
	d_step {
		s_rev = rev; s_last = last; s_last_mr = last_mr; s_head = head; s_head_mr = head_mr;
		i = 0;
		do
		:: i < NS -> s_sid[i] = sid[i]; s_sown[i] = sown[i]; s_srec[i] = srec[i]; s_smr[i] = smr[i]; i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NH -> s_ans[i] = ans[i]; s_ans_mr[i] = ans_mr[i]; i++
		:: else -> break
		od
	};
	d_step {
		last = s_last; last_mr = s_last_mr; head = s_head; head_mr = s_head_mr;
		i = 0;
		do
		:: i < NS -> sid[i] = s_sid[i]; sown[i] = s_sown[i]; srec[i] = s_srec[i]; smr[i] = s_smr[i]; i++
		:: else -> break
		od;
		i = 0;
		do
		:: i < NH ->
			ans[i] = s_ans[i]; ans_mr[i] = s_ans_mr[i];
			commits[i] = (s_ans[i] != 0);        /* a commit lost with the restore is undone */
			i++
		:: else -> break
		od;
#ifdef BROKEN_NO_BUMP
		rev = s_rev;
#else
		rev = s_rev + BUMP;
#endif
#ifndef BROKEN_NO_COMPACT_CHECK
		compacted = rev;
#endif
		epoch++;
		done_max = last
	}
}
#else
/* code: etcdStore.load: the marker into an empty prefix, the builds, the
 * head, then last with the marker removed */
proctype importer() {
	atomic {
		if
		:: last_mr == 0 && sid[0] == 0 && !importing ->
			rev++;
#ifndef BROKEN_IMPORT_NO_MARKER
			importing = true; imp_mr = rev;
#endif
			imp_started = true
		:: else -> goto end                  /* not empty: exit 2 */
		fi
	};
	atomic {
		rev++;
		sid[NS-1] = IMP_ID; sown[NS-1] = NOBODY; srec[NS-1] = NOBODY; smr[NS-1] = rev
	};
	atomic { rev++; head = IMP_ID; head_mr = rev };
	atomic {
		if
		:: last_mr == 0 ->
			rev++;
			importing = false; imp_mr = 0;
			last = IMP_ID; last_mr = rev;
			imp_done = true
		:: else -> imp_done = true           /* ids were issued meanwhile: NotEmpty, half imported */
		fi
	};
end:
	skip
}
#endif

init {
	atomic {
		rev = 1;
#ifdef IMPORT
		run importer();
#else
#ifndef NORESTORE
		run restorer();
#endif
#endif
		run host(0, CLOCK0);
		run host(1, CLOCK);
#if NH > 2
		run host(2, CLOCK)
#endif
	}
}
