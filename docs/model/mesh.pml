/*
 * mesh.pml: the mesh across hosts, for spin (issue 29). Two models in one
 * file: the gathering of a mesh window (the default) and the budget of
 * hosts down (-DSLOTS).
 *
 * THE GATHERING (pkg/ledger/gathering.go, pkg/ledger/gather.go)
 *
 * etcd holds one gathering's keys: doc (with its runner), deadline (under
 * a lease of gather), joined/HOST (under the member's session lease),
 * joined-ever/HOST, held/HOST, started, failed and end. Each ledger call is
 * one atomic step: its read and its transaction's compares see the same
 * state. Start is two steps (its read, then its commit), so that its
 * compares matter.
 *
 * Three hosts are expected (the members when the gathering is created).
 * Each runs a window (Host): it joins; the first to join creates the
 * gathering and runs the step. Once every member joined, each holds its
 * containers, then writes held. The runner waits until every member held
 * and is alive, starts, runs the step container, waits for its exit and
 * records the end. The others wait for the start, then for the end, and
 * may give up past their bound (the deadline plus the timeout): they exit
 * and leave their hold, which is then stale. A member closes its hold
 * (its containers come back) on a recorded end or a failed gathering.
 *
 * Faults, MAXK in all (default 2), at any step of a window:
 *   - a kill: the window dies and its session lapses. Its hold stays.
 *   - a lapse: the session lapses (etcd unreachable for its TTL), and the
 *     window runs on.
 * The deadline's lease lapses at any moment. The step container's start
 * may be in flight when its window dies (the engine carries it out), and
 * the container exits at any moment: it runs on after its window died.
 *
 * Each host's next apply (Next) runs once its window ended. It releases a
 * stale hold only when the hold's gathering is over (releaseStale asking
 * GatheringByID: Gathering.Over). On the runner's host it records the
 * step's end (RecordEnd) once its window is dead and the step container
 * exited. The runner's host also runs its window once more (the next cron
 * line): a join that must be refused.
 *
 * Properties (the Monitor's assertions; and no invalid end state):
 *   (1) no member's containers run normally while the step runs:
 *       stepc implies every member holds;
 *   (2) the step runs at most once: no window starts it twice;
 *   (3) no member releases its hold while the step may run (started and
 *       no end recorded): a lapsed lease is not proof of the end;
 *   (4) a failed gathering never starts: not both failed and started.
 *
 * Variants, for scripts/model (each must make a property fail):
 *   BROKEN_START_EARLY       Start waits for every member joined, not held:
 *                            the step runs beside a member not yet holding (1)
 *   BROKEN_START_NO_COMPARE  Start's commit does not compare failed nor the
 *                            members' sessions: a gathering failed since its
 *                            read starts (4)
 *   BROKEN_STALE_TRUSTS_LEASE the stale release takes the runner's lapsed
 *                            session as the end: a member comes back while
 *                            the dead runner's step runs (3)
 *   BROKEN_JOIN_AFTER_START  join does not refuse a started gathering: the
 *                            runner's host joins again, is its runner, and
 *                            runs the step a second time (2)
 *   BROKEN_LAPSE_FAILS_STARTED failureOf does not skip a started gathering:
 *                            a member's lapse after the start fails it (4)
 *   BROKEN_END_IN_FLIGHT     the runner's host records the end of a step
 *                            container that is not running, its start in
 *                            flight: the members come back, then it runs (1)
 *
 * THE BUDGET (-DSLOTS: pkg/coord/budget.go, pkg/ledger/budget.go)
 *
 * Three hosts apply a change of the module at once under max-unavailable
 * K (1). Each apply (Apply) takes a slot (Budget.Take → ledger.TakeSlot:
 * a read of the slots, then a transaction that compares that no slot key
 * was created since), stops its containers (the host is down), brings
 * them back healthy (the health gate), and gives its slot back
 * (Budget.GiveBack → GiveBackSlot). A slot not had may be waited for, or
 * given up (--lock-timeout, exit 3). MAXK kills (default 2) at any step.
 * A slot has no lease: a dead holder's slot stays. The host's next apply
 * (Next) repairs what is down (a repair takes no slot: that host is
 * counted), then gives back the dead process's slot (GiveBack).
 *
 * A slot holds its holder's token; mesh.json (rec) records the slot
 * before the take. With -DTWO_APPLIES, two hosts, and host 0 runs two
 * applies at once: intend waits for a live one's record, and takes over a
 * dead one's; GiveBack gives back only for a module healthy as a whole.
 *
 * With -DBUDGET_CHANGE, the members' budgets are K+1 at first, and host
 * 2's apply publishes K at any moment (the smallest one holds: limitOf).
 * TakeSlot's commit also compares that no member record changed since its
 * read.
 *
 * Properties: never more than K hosts down (K+1 with BUDGET_CHANGE); a
 * take commits only within the smallest budget published at its commit;
 * no invalid end state.
 *
 * Variants:
 *   BROKEN_LEASE_FREE        a dead holder's slot is freed at once (as a
 *                            lease would): another host goes down beside it
 *   BROKEN_NO_COMPARE        TakeSlot's commit does not compare: two hosts
 *                            take the last slot
 *   BROKEN_GIVE_BACK_EARLY   the slot is given back before the health gate
 *   BROKEN_INTEND_NO_WAIT    (TWO_APPLIES) intend does not wait for a live
 *                            apply of the host: the second replaces the
 *                            slot, finds the module healthy and gives the
 *                            slot back as the first one stops
 *   BROKEN_GIVE_BACK_OWN_HEALTH (TWO_APPLIES) GiveBack once this apply's
 *                            containers are back, the module still down
 *                            from a dead apply of the host
 *   BROKEN_NO_MEMBER_COMPARE (BUDGET_CHANGE) the commit does not compare the
 *                            members: a take read under K+1 commits after
 *                            the budget fell to K, past it
 */

#ifndef MAXK
#define MAXK 2
#endif

byte kills;        /* faults so far */
bool dead[3];      /* host i's window (apply) was killed */
bool gone[3];      /* host i's window (apply) ended, dead or not */

#ifndef SLOTS

/* etcd: the gathering's keys */
bool gexists;      /* doc: the gathering was created */
byte runner;       /* doc.Runner */
bool deadline;     /* deadline, under its lease of gather */
bool joined[3];    /* joined/HOST, under the member's session lease */
bool ever[3];      /* joined-ever/HOST */
bool held[3];      /* held/HOST */
bool started, failed, ended;

/* the hosts */
bool holding[3];   /* host i's hold of the step is recorded: its containers held */
bool stepc;        /* the step container runs, on the runner's host */
bool starting;     /* its start is in flight (it reads "created"): the
                    * engine carries it out, also once the window died */
byte runs;         /* the step's starts: a window sent its start */

#define ALLJOINED (joined[0] && joined[1] && joined[2])
#define ALLHELD (held[0] && held[1] && held[2])
#define ALLHOLDING (holding[0] && holding[1] && holding[2])
#define LAPSED(h) (ever[h] && !joined[h])
#define OVER (ended || failed)

/* code: failureOf. A member's session lapsed, or the deadline passed with
 * hosts missing, and the gathering has not started nor failed. */
#ifdef BROKEN_LAPSE_FAILS_STARTED
#define FAILURE (gexists && !failed && !ended && \
	(LAPSED(0) || LAPSED(1) || LAPSED(2) || !started && !deadline && !ALLJOINED))
#else
#define FAILURE (gexists && !failed && !started && \
	(LAPSED(0) || LAPSED(1) || LAPSED(2) || !deadline && !ALLJOINED))
#endif

/* code: wait's failure check: a failure met is written (writeFail,
 * compared by notStarted). In the broken variant it is written anyway. */
inline meet() {
	if
	:: FAILURE -> failed = 1; assert(!(failed && started))  /* (4) */
	:: else
	fi
}

/* code: JoinGathering → join (or create, for the first). ok: joined. */
inline join(i, ok) {
	atomic {
		ok = 0;
		if
		:: !gexists ->
			/* code: create: doc, deadline and fence, and the join */
			gexists = 1; runner = i; deadline = 1;
			joined[i] = 1; ever[i] = 1; ok = 1
		:: gexists && failed && deadline -> skip   /* refused: its failure */
#ifndef BROKEN_JOIN_AFTER_START
		:: gexists && !(failed && deadline) && started -> skip  /* refused: after the start */
#endif
		:: gexists && !(failed && deadline) && !started && !deadline ->
			meet()                                 /* refused: after the deadline */
		:: gexists && !(failed && deadline) && !started && deadline && joined[i] -> skip
#ifdef BROKEN_JOIN_AFTER_START
		:: gexists && !failed && started && deadline && joined[i] -> skip
		:: gexists && !failed && started && !deadline -> skip
		:: gexists && !failed && started && deadline && !joined[i] && !FAILURE ->
			joined[i] = 1; ever[i] = 1; ok = 1
#endif
		:: gexists && !failed && !started && deadline && !joined[i] && FAILURE ->
			meet()                                 /* the gathering failed */
		:: gexists && !failed && !started && deadline && !joined[i] && !FAILURE ->
			/* the join's transaction: notStarted, deadline there, not joined */
			joined[i] = 1; ever[i] = 1; ok = 1
		fi
	}
}

/* One host's window run of the mesh: all step. */
proctype Host(byte i) {
	bool ok;
	{
		join(i, ok);
		if
		:: !ok -> goto out                         /* exit 3, or 1 naming the failure */
		:: else
		fi;
		/* code: AllJoined: wait until every member joined (holding) */
		atomic {
			(failed || FAILURE || ALLJOINED || started);
			meet()
		};
		if
		:: failed -> goto out                      /* nothing held: exit 1 */
		:: else
		fi;
		/* the window records its hold, naming the gathering, and holds */
		holding[i] = 1;
		/* code: Held: held/HOST, compared by notStarted and this session */
		atomic {
			meet();
			if
			:: !failed && !started -> held[i] = 1
			:: else
			fi
		};
		if
		:: failed -> goto back
		:: else
		fi;
		if
		:: runner == i ->
			/* code: Start: its read, until every member held and is alive */
start:
			atomic {
#ifdef BROKEN_START_EARLY
				(failed || FAILURE || started || ALLJOINED);
#else
				(failed || FAILURE || started || ALLHELD && ALLJOINED);
#endif
				meet()
			};
			if
			:: failed -> goto back
			:: else
			fi;
			/* its commit: notStarted and each member's joined revision */
			atomic {
#ifdef BROKEN_START_NO_COMPARE
				started = 1; assert(!(failed && started))  /* (4) */
#else
				if
#ifdef BROKEN_START_EARLY
				:: !failed && !started && ALLJOINED ->
#else
				:: !failed && !started && ALLHELD && ALLJOINED ->
#endif
					started = 1; assert(!(failed && started))  /* (4) */
				:: else -> goto start              /* lost its compare: read again */
				fi
#endif
			};
			/* the window creates the step container and starts it: the
			 * request is in the engine, and returns once the step runs */
			atomic { starting = 1; runs++ };
			(!starting);
			/* the window waits for its exit */
			(!stepc);
			/* code: End → RecordEnd */
			atomic {
				if
				:: started && !ended -> ended = 1
				:: else
				fi
			};
			goto back
		:: else ->
			/* code: WaitStart */
			atomic {
				(failed || FAILURE || started);
				meet()
			};
			if
			:: failed -> goto back
			:: else
			fi;
			/* code: WaitEnd, until the deadline plus the step's timeout */
			if
			:: ended -> goto back
			:: atomic { failed || FAILURE -> meet() }; goto back
			:: true -> goto out                    /* past its bound: the hold stays */
			fi
		fi;
back:
		/* the close: the containers come back, then Closed */
		atomic { assert(!started || ended); holding[i] = 0 }  /* (3) */
out:
		/* Leave: the session ends (revoked, or lapsing) */
		atomic { joined[i] = 0; gone[i] = 1 }
	} unless {
		atomic { dead[i] -> joined[i] = 0; gone[i] = 1 }
	}
}

/* Host i's next apply (and, on the runner's host, its next window run),
 * once its window ended. Never killed: the next cron run. */
proctype Next(byte i) {
	bool ok, rerun;
	(gone[i]);
end:
	do
	/* code: the runner's host finds its dead window's step container
	 * exited and records the step's end (RecordEnd). One that reads
	 * "created" (its start in flight) it removes first, as
	 * removeDeadSteps does on one host: the start then never lands. */
#ifdef BROKEN_END_IN_FLIGHT
	:: atomic { dead[i] && gexists && runner == i && started && !ended && !stepc -> ended = 1 }
#else
	:: atomic { dead[i] && starting -> starting = 0 }
	:: atomic { dead[i] && gexists && runner == i && started && !ended && !stepc && !starting -> ended = 1 }
#endif
	/* code: releaseStale of a hold of a mesh window: only once the
	 * gathering is over (GatheringByID: Gathering.Over) */
	:: atomic { holding[i] && OVER -> assert(!started || ended); holding[i] = 0 }  /* (3) */
#ifdef BROKEN_STALE_TRUSTS_LEASE
	:: atomic { holding[i] && !joined[runner] -> assert(!started || ended); holding[i] = 0 }
#endif
	/* the runner's host runs its window once more: a join, refused */
	:: gexists && runner == i && !rerun ->
		rerun = 1;
		join(i, ok);
		if
		:: ok && started ->
			/* joined() makes it the runner: AllJoined, Held and Start
			 * return at once on a started gathering, and it runs the step */
			atomic { holding[i] = 1; stepc = 1; runs++ }  /* (the start at once) */
		:: else
		fi
	od
}

/* The deadline's lease and the step container. */
active proctype Env() {
end:
	do
	:: atomic { deadline -> deadline = 0 }        /* the deadline passes */
	:: atomic { starting -> starting = 0; stepc = 1 }  /* its start lands */
	:: atomic { stepc -> stepc = 0 }              /* the step container exits */
	od
}

active proctype Killer() {
end:
	do
	:: kills < MAXK ->
		if
		:: atomic { !gone[0] -> dead[0] = 1 }     /* a kill */
		:: atomic { !gone[1] -> dead[1] = 1 }
		:: atomic { !gone[2] -> dead[2] = 1 }
		:: atomic { !gone[0] && joined[0] -> joined[0] = 0 }  /* a lapse */
		:: atomic { !gone[1] && joined[1] -> joined[1] = 0 }
		:: atomic { !gone[2] && joined[2] -> joined[2] = 0 }
		:: else -> break
		fi;
		kills++
	:: kills >= MAXK -> break
	od
}

active proctype Monitor() {
end:
	do
	:: atomic { runs > 1 -> assert(runs <= 1) }                         /* (2) */
	:: atomic { stepc && !ALLHOLDING -> assert(!stepc || ALLHOLDING) }  /* (1) */
	od
}

init {
	atomic {
		run Host(0); run Host(1); run Host(2);
		run Next(0); run Next(1); run Next(2)
	}
}

#else /* SLOTS */

#ifndef K
#define K 1
#endif
#ifdef TWO_APPLIES
#define NH 2       /* hosts */
#define NA 3       /* applies: a runs on host a % 2; host 0 runs two */
#else
#define NH 3
#define NA 3
#endif

byte slot[NH];     /* etcd: slots/MODULE/HOST (no lease): its token, 0 for none */
byte srev[NH];     /* that key's mod revision */
byte created;      /* the slots prefix's latest create revision */
byte rec[NH];      /* mesh.json on host h: the token of the slot recorded */
byte down[NH];     /* containers of the module that host h has down */
bool adead[NA];    /* apply a was killed */
bool agone[NA];    /* apply a ended, dead or not */

#ifdef BUDGET_CHANGE
/* The smallest budget the members published (limitOf), and the members
 * prefix's latest mod revision. Host 2's mesh file lowers its budget. */
byte limit = K + 1;
byte mrev;
#define LIMIT limit
#define MAXDOWN (K + 1)
#else
#define LIMIT K
#define MAXDOWN K
#endif

#if NH == 3
#define NSLOTS ((slot[0] != 0) + (slot[1] != 0) + (slot[2] != 0))
#define NDOWN ((down[0] != 0) + (down[1] != 0) + (down[2] != 0))
#else
#define NSLOTS ((slot[0] != 0) + (slot[1] != 0))
#define NDOWN ((down[0] != 0) + (down[1] != 0))
#endif
#define OTHERS(h) (NSLOTS - (slot[h] != 0))
/* a token's process is alive: its budget lock is held (Dir.Held) */
#define LIVE(t) (t != 0 && !agone[t - 1])

/* One apply (token a+1) on host h of a change that stops the module
 * (stop-first). */
proctype Apply(byte a; byte h) {
	byte rv, mr, sr, tok;
	bool busy, mine;
	{
		/* code: Budget.intend: record the slot in mesh.json first. A
		 * live process of this host that recorded one is waited for, a
		 * dead one's is taken over (this host is counted already). */
		if
#ifdef BROKEN_INTEND_NO_WAIT
		:: rec[h] = a + 1
#else
		:: atomic { !LIVE(rec[h]) || rec[h] == a + 1 -> rec[h] = a + 1 }
#endif
		:: true -> goto out                      /* not had in time: exit 3 */
		fi;
take:
		/* code: TakeSlot's read of the members and slots */
		atomic {
			rv = created;
			sr = srev[h];
			mine = (slot[h] != 0);
#ifdef BUDGET_CHANGE
			mr = mrev;
#endif
			busy = (!mine && OTHERS(h) >= LIMIT)
		};
		if
		:: busy ->
			if
			:: atomic { OTHERS(h) < LIMIT -> skip }; goto take  /* WaitSlots: a change */
			:: true -> goto forget                 /* not had in time: exit 3 */
			fi
		:: else
		fi;
		/* its commit: this host's slot key unchanged (a dead process's,
		 * replaced), or none and no slot key created since the read; and
		 * no member record changed (the budget it read still holds) */
		atomic {
#ifdef BROKEN_NO_COMPARE
			if
			:: slot[h] == 0 -> created++
			:: else
			fi;
			slot[h] = a + 1; srev[h]++
#else
			if
			:: mine && srev[h] == sr -> slot[h] = a + 1; srev[h]++
#if defined(BUDGET_CHANGE) && !defined(BROKEN_NO_MEMBER_COMPARE)
			:: !mine && slot[h] == 0 && created == rv && mrev == mr ->
#else
			:: !mine && slot[h] == 0 && created == rv ->
#endif
				slot[h] = a + 1; srev[h]++; created++
			:: else -> goto take                 /* lost the compare: read again */
			fi
#endif
			;assert(NSLOTS <= LIMIT)             /* within the smallest budget */
		};
		/* the recreate's stop: the module is down on this host */
		down[h]++;
#ifdef BROKEN_GIVE_BACK_EARLY
		atomic { if :: slot[h] == a + 1 -> slot[h] = 0; srev[h]++ :: else fi };
#endif
		/* the new containers start and pass the health gate */
		down[h]--;
		/* code: GiveBack, for the modules the apply found healthy (all
		 * their containers, not only this apply's) */
		atomic {
#ifndef BROKEN_GIVE_BACK_OWN_HEALTH
			if
			:: down[h] != 0 -> goto out          /* the slot stays, for the next apply */
			:: else
			fi;
#endif
			/* its read of mesh.json */
			tok = rec[h];
			if
			:: tok == 0 || tok != a + 1 && LIVE(tok) -> goto out  /* another live apply's */
			:: else
			fi
		};
		/* code: GiveBackSlot: removed only if tok still holds it */
		atomic { if :: slot[h] == tok -> slot[h] = 0; srev[h]++ :: else fi };
forget:
		/* code: forget: mesh.json drops the record if tok still has it */
		atomic { if :: rec[h] == a + 1 || tok != 0 && rec[h] == tok -> rec[h] = 0 :: else fi };
out:
		agone[a] = 1
	} unless {
		atomic {
			adead[a] ->
#ifdef BROKEN_LEASE_FREE
			if :: slot[h] == a + 1 -> slot[h] = 0; srev[h]++ :: else fi;
#endif
			agone[a] = 1
		}
	}
}

/* Host h's next apply, once its applies ended: it repairs the module (a
 * repair of a container down takes no slot: this host is counted), then
 * GiveBack gives back the slot a dead process of this host left. Never
 * killed. */
proctype Next(byte h) {
	atomic {
#ifdef TWO_APPLIES
		agone[h] && (h != 0 || agone[2]) ->
#else
		agone[h] ->
#endif
		down[h] = 0;
		if :: rec[h] != 0 && slot[h] == rec[h] -> slot[h] = 0; srev[h]++ :: else fi;
		rec[h] = 0
	}
}

#ifdef BUDGET_CHANGE
/* code: host 2's apply publishes its lower budget (Budget.Publish →
 * PutMember), at any moment */
active proctype Publish() {
	atomic { limit = K; mrev++ }
}
#endif

active proctype Killer() {
end:
	do
	:: kills < MAXK ->
		if
		:: atomic { !agone[0] -> adead[0] = 1 }
		:: atomic { !agone[1] -> adead[1] = 1 }
		:: atomic { !agone[2] -> adead[2] = 1 }
		:: else -> break
		fi;
		kills++
	:: kills >= MAXK -> break
	od
}

active proctype Monitor() {
end:
	do
	:: atomic { NDOWN > MAXDOWN -> assert(NDOWN <= MAXDOWN) }
	od
}

init {
	atomic {
		run Apply(0, 0); run Apply(1, 1);
#ifdef TWO_APPLIES
		run Apply(2, 0);
		run Next(0); run Next(1)
#else
		run Apply(2, 2);
		run Next(0); run Next(1); run Next(2)
#endif
	}
}

#endif
