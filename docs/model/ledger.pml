/*
 * ledger.pml: the build ledger's rule (build request, build record) and
 * apply's resolution of artifact:, at the granularity of the code, for spin.
 * It models the rule and the order of its writes, not the files' layout:
 * the ledger is being moved behind a storage interface, and any backend must
 * keep these steps (one lock; a request writes the index; a record writes
 * the module's head, then the index).
 *
 * NB builders (2 by default) each request a build of module m (ids are issued
 * in request order, 1, 2, …) and record it, with an image or failed; two applies
 * resolve "artifact: m" once before the state lock (to pull) and again under
 * it, and deploy what they resolved there. A killer may SIGKILL any builder
 * between any two steps (MAXK kills; a killed apply only drops the state
 * lock, which changes nothing the ledger's properties speak of); a builder killed after its id was
 * issued records it again (its CI job's retry), with the same result.
 *
 * Properties:
 *   - the module's current build never moves to an older request (assertion
 *     at every write of the module's head);
 *   - what apply deploys never moves to an older build (assertion at every
 *     write of applied.json);
 *   - once every builder is done, the current build is the newest request
 *     recorded with an image (assertion at the end);
 *   - the ledger holds every record: a build no longer pending is found
 *     recorded (assertion where a record finds it not pending);
 *   - no deadlock (invalid end states).
 *
 * Variants, for scripts/model (each must make a property fail):
 *   BROKEN_FINISH_ORDER     a successful record always becomes current
 *   BROKEN_RESOLVE_EARLY    apply deploys what it resolved before the lock
 *   BROKEN_INDEX_FIRST      a record forgets the build as pending (index)
 *                           before it writes the head: a kill between loses
 *                           the record
 */

#ifndef MAXK
#define MAXK 2
#endif
#ifndef NB
#define NB 2
#endif

/* flocks: owner (1..3 builders, 4..5 applies), 0 when free */
byte llock;       /* "ledger" */
byte slock;       /* "state" (apply) */

/* ledger files */
byte idx_last;    /* index.json: the last id issued */
byte idx_pend;    /* index.json: the pending builds, a bit per id */
byte head_cur;    /* m.module.json: the current build (0: none) */
byte head_last;   /* m.module.json: the build recorded last */

/* state files */
byte deployed;    /* applied.json: the build apply deployed */

/* ghosts */
byte recorded;    /* builds the head (or its chunks) records, a bit per id */
byte rec_ok;      /* builds the head records with an image, a bit per id */
bool dead[6];
bool done[6];
byte kills;

#define bit(i) (1 << (i))

inline lock(l, me) { atomic { l == 0 -> l = me } }

/* code: ledger.Request: lock, read the index, issue last+1, write the
 * index (plans.json after it, no shared effect here), unlock. Steps that
 * only read, under the lock, are one step with the write they lead to: a
 * kill between them is a kill before the write. */
inline request(me) {
	lock(llock, me);
	atomic {
		last = idx_last + 1;                       /* code: lockIndex, nextSeq */
		idx_last = last;                           /* code: lk.Write(index.json) */
		idx_pend = idx_pend | bit(last)
	};
	myid = last;                                   /* the id printed: the builder has it */
	atomic { llock = 0; last = 0 }
}

/* code: ledger.Record of myid, with an image when ok. */
inline record(me) {
	lock(llock, me);
	atomic { last = idx_last; pend = idx_pend;      /* code: lockIndex */
	         cur = head_cur; hl = head_last };      /* code: readModule */
	if
	:: (pend & bit(myid)) == 0 ->
		/* code: findRecorded, again(): recorded before, it is found in
		 * the module's head (or chunks) and compared; nothing is written.
		 * An id issued (at or below last) is never unknown. */
		assert(myid <= last && (recorded & bit(myid)) != 0)
	:: else ->
		if
		:: hl == myid ->
			/* recorded, killed before the index: forget it as pending */
			atomic { pend = pend & ~bit(myid); idx_pend = pend }
		:: else ->
			if
			:: hl != 0 -> pend = pend & ~bit(hl)     /* the same crash, for the build before */
			:: else
			fi;
			/* code: Decide */
#ifdef BROKEN_FINISH_ORDER
			if :: ok -> cur = myid :: else fi;
#else
			if :: ok && (cur == 0 || myid >= cur) -> cur = myid :: else fi;
#endif
			pend = pend & ~bit(myid);
#ifdef BROKEN_INDEX_FIRST
			idx_pend = pend;                         /* code: lk.Write(index.json) */
#endif
			atomic {                                 /* code: lk.Write(m.module.json) */
				assert(cur >= head_cur);
				head_cur = cur; head_last = myid;
				recorded = recorded | bit(myid);
				if :: ok -> rec_ok = rec_ok | bit(myid) :: else fi
			};
#ifndef BROKEN_INDEX_FIRST
			idx_pend = pend                          /* code: lk.Write(index.json) */
#endif
		fi
	fi;
	atomic { llock = 0; last = 0; pend = 0; cur = 0; hl = 0 }
}

/* A killed process: the kernel drops its flocks. */
inline die(me) {
	atomic {
		if :: llock == me -> llock = 0 :: else fi;
		if :: slock == me -> slock = 0 :: else fi
	}
}

proctype Builder(byte me) {
	byte myid, last, pend, cur, hl;
	bool ok;
	if :: ok = 1 :: ok = 0 fi;
	{
		request(me);
		/* the build runs, with no lock */
		record(me);
		atomic { done[me] = 1; myid = 0; ok = 0 }
	} unless { dead[me] };
	if
	:: dead[me] ->
		die(me);
		/* its CI job retries the record, if it had got its id */
		if
		:: myid != 0 -> record(me)
		:: else
		fi;
		atomic { done[me] = 1; myid = 0; ok = 0 }
	:: else
	fi
}

/* code: apply.Run: Desire before the lock (ledger.Current, a lock-free read
 * of the head), pulls, then runLocked: the state lock, Desire again, and
 * record writes applied.json. */
proctype Apply(byte me) {
	byte pre, now;
	pre = head_cur;                                  /* code: Desire (to pull) */
	lock(slock, me);
	/* code: Desire under the lock; plan, execute; record writes
	 * applied.json. Nothing else writes applied.json while the state lock
	 * is held, so the read and the write are one step here. */
	atomic {
		now = head_cur;
#ifdef BROKEN_RESOLVE_EARLY
		now = pre;
#endif
		assert(now >= deployed);
		deployed = now
	};
	atomic { slock = 0; done[me] = 1; pre = 0; now = 0 }
}

#define kill(v) atomic { kills < MAXK && !done[v] && !dead[v] -> dead[v] = 1; kills++ }

active proctype Killer() {
end:
	do
	:: kill(1)
	:: kill(2)
	:: kill(3)
	od
}

init {
	byte i, newest;
	atomic {
		run Builder(1); run Builder(2);
#if NB > 2
		run Builder(3);
#else
		done[3] = 1;
#endif
		run Apply(4); run Apply(5)
	}
	/* once every builder is done, the current build is the newest request
	 * recorded with an image */
	(done[1] && done[2] && done[3] && llock == 0);
	i = 1;
	do
	:: i <= NB -> if :: rec_ok & bit(i) -> newest = i :: else fi; i++
	:: else -> break
	od;
	assert(head_cur == newest)
}
