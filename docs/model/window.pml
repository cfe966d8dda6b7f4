/*
 * window.pml: meshctl's window protocol (apply, window open, step, close,
 * stale release) at the granularity of the code, for spin. docs/model/README.md
 * says what is modelled and how scripts/model checks it.
 *
 * One module with one held container C and a run: step (its one-off step
 * container). C may exit by itself once (so an apply recreates it, under a
 * claim, with the state lock released). Two windows on the module (W1, W2)
 * and one apply (A) run at once; a killer may SIGKILL any of them between
 * any two of their steps (MAXK kills in all). A kill drops the process's
 * flocks (the state lock, its module lock, its window lock, an apply's
 * claim) and whatever it was doing; the engine finishes a stop already in
 * flight, and a start of the step container: a step container started, or
 * being started, runs on. Once the killer is done and W1, W2 and A have ended, a last apply
 * (F, never killed: the next cron run) runs, again while a hold remains.
 *
 * Each line marked "code:" is one lock, one state-file write or one engine
 * call of the Go code, named by its function.
 *
 * Variants, for scripts/model (each must make a property fail):
 *   BROKEN_HOLD_EARLY   the close does not wait for the step container to
 *                       exit (nor check it) before bringing C back
 *   BROKEN_LIST_FIRST   liveness lists the engine before checking the
 *                       window locks
 *   BROKEN_NO_SETTLE    a stale release starts C without first waiting for
 *                       the stop its dead window left in flight
 *   BROKEN_NO_RELEASE   the last apply does not release stale holds
 *   BROKEN_STEP_REMOVED_LATE  a stale release removes the dead window's
 *                       step container only after it has brought C back (the
 *                       code before f9834a4): a start the window sent before
 *                       it died lands after C's start
 *
 *   BROKEN_OPEN_STOPS_LISTED  the window's open stops C only when its
 *                       listing read C running (the code before the fix of
 *                       "A new container's start in flight", README.md): a
 *                       start of a new C that a killed apply sent lands
 *                       mid-step
 *
 * Engine semantics (on unless NO_APPLY_START_IN_FLIGHT):
 *   APPLY_START_IN_FLIGHT  the engine finishes the start of a new C that an
 *                       apply killed mid-recreate had sent
 *
 *   BROKEN_APPLY_WAITS  an apply that finds a window open waits, under the
 *                       state lock, for the window to end instead of
 *                       planning its containers "held"
 *
 * NO_ENGINE_RESTART, NO_LIST_ERROR leave out dockerd's restart and the
 * failed listing, to keep a check small where they are not its subject.
 *
 * EXEC_STEP: the step is an exec: step, processes on the host in a group
 * its guard kills when the window dies (a moment after the window's locks
 * are free); the hold names the group, and liveness asks the host, not the
 * engine, whether a process of it runs. No start in flight, nothing for a
 * release to remove.
 *   BROKEN_EXEC_NO_GROUP  (with EXEC_STEP) a dead window's exec: hold is
 *                       stale at once, whatever its group runs (the code
 *                       before the hold named the group)
 *
 *   BROKEN_UNKNOWN_STALE  a listing that fails (an engine error) is taken
 *                       as one where nothing runs: a dead window's hold reads
 *                       stale where the code says unknown and stays honoured
 *
 *   BROKEN_STOP_FIRST   the window's open stops C before it sets C's restart
 *                       policy to "no": a restart of the engine in between
 *                       starts C again (the engine acts on the policy)
 *
 * The engine acts on C's restart policy: dockerd may restart once (an
 * upgrade, with live-restore: running containers run on), and then starts
 * a stopped container whose policy is "always", manual stop or not; the
 * step container's policy is "no".
 *
 * RECREATE: the recreate paths, container by container. C runs version 1
 * (applied.json says 1); every apply applies a file that wants version 2,
 * which passes its health gate or not (chosen once, at the start). Two
 * applies (A, B) overlap; each recreate is lifecycle.Executor.Recreate step
 * by step on engine containers that have a name (C, C.meshctl-new,
 * C.meshctl-old), a version, and run or not; every start may be in flight
 * when its sender dies. An apply killed mid-recreate leaves a dead claim:
 * the next apply's heal (HealClaims), or a window's open (healDead), puts the
 * last good container back. An apply that finds C held defers its change
 * (applied.json); the window's close carries it out (bringOne: the same
 * Recreate); a window killed in that recreate is healed by the stale
 * release (removeDeadNews, putBackAside). C exiting by itself, dockerd's
 * restart and the failed listing are left out (the default configuration
 * checks them); ONE_WINDOW leaves W2 out. Properties, beside the step's:
 * never two containers of C run at once; once everything has ended, the last apply leaves exactly
 * one container of C, under its name, running the last version that
 * passed its gate (version 2 if it passes, else version 1).
 *   BROKEN_RELEASE_KEEPS_NEW  a stale release leaves the new container of
 *                       a dead window's close under its temporary name (the
 *                       code before e457c16, removeDeadNews): it runs beside
 *                       the held one the release starts
 *   BROKEN_NO_HEAL_ASIDE  the heal of a dead claim leaves the container set
 *                       aside (C.meshctl-old) where it is
 *   BROKEN_OPEN_NO_HEAL  a window's open does not heal the dead claims on
 *                       what it holds (the code before 68c408c)
 *   BROKEN_APPLY_NO_WAIT  an apply does not wait for another apply's live
 *                       claim (takeLock)
 *   BROKEN_HEAL_IGNORES_HOLDS  an apply's heal takes C as its own though a
 *                       hold holds it
 * The close recreates C if and only if its hold records that an apply
 * reported C deferred during the window (holddef, Hold.Deferred), to the
 * version it reads at the close. Property: what was reported deferred is
 * what runs once the close drops its hold (unless its recreate failed, or
 * it gave up after closeRounds).
 * CONTENT_DRIFT (with RECREATE): the desired state reads version 2 from
 * the start while C runs 1 (an env-file's content changed after the last
 * apply, before any window opened).
 *   BROKEN_CLOSE_AT_OPEN  the close recreates C only when the desired
 *                       state changed since the open (the code before the
 *                       hold recorded deferrals): the deferred change is
 *                       not carried out
 * DEFER_CLAIM (with RECREATE): an apply that defers C's change also changes
 * another container, D: the deferral is made under a claim (Defers C), and
 * written to applied.json once D is done; the close waits for such a
 * claim (claims.Deferring) before it drops its hold.
 *   BROKEN_CLOSE_NO_DEFERRING  the close does not look for a claim that
 *                       defers a change to what it holds (the code before
 *                       5407744): the change is lost
 * The code before the fixes of the bugs this configuration found (README.md,
 * "Bugs the recreate configuration found"):
 *   BROKEN_HEAL_TRUSTS_LISTING  HealClaims starts the old C of a dead claim
 *                       only when it found a leftover new one and the
 *                       listing read C stopped (a start or a stop in flight
 *                       fools it; before 58067ee)
 *   BROKEN_RELEASE_POLICY_ONLY  releaseStale waits for a dead window's stop
 *                       only on a C whose policy is "no" (a dead close's
 *                       recreate in its second round stops one whose policy
 *                       is back; before 6652623)
 * LOST_ANSWER (with RECREATE): one engine call's answer may be lost (the
 * engine did it, the caller sees an error), once a run, on any StopThrough,
 * Start, Rename or Remove of a Recreate and its put-backs: a failed stop or
 * start leads to putBackUnmoved (RemoveNew, putBackName, restart), a rename
 * asks the engine (Executor.rename), removeGone removes again; a recreate
 * that failed so makes the last apply run again (as the next cron run
 * would); a close whose recreate failed with the old one not back under C
 * starts nothing and keeps its hold.
 *   BROKEN_RENAME_LOST_UNASKED  a failed rename is taken as not done, and
 *                       putBackUnmoved does not ask under which name the old
 *                       one is (no putBackName): the code before 2793d10
 * START_FIRST (with RECREATE, NO_WINDOW): C's update order is start-first:
 * a recreate of a running C is recreateStartFirst (create C.meshctl-new
 * without the aliases, Start, the gate; passed: takeAliases, rename the
 * old one C.meshctl-retiring, the new one C, retire: leaveNetworks, the
 * drain, StopThrough, removeGone; failed: RemoveNew, the old one
 * untouched), of a stopped one the stop-first Recreate; HealClaims carries a
 * dead claim's recreate whose old one is retiring through
 * (finishStartFirst), else removes the leftover new one. Properties: while
 * no apply has been killed, a container of C that passed a gate runs, not
 * stopping, under the aliases, in every state (no gap; two containers of C
 * run during the overlap, by design); at the end, one container of C,
 * under its name and the aliases, running the last version that passed its
 * gate. No window: its open stops C (a gap by design).
 *   BROKEN_RETIRE_BEFORE_GATE  the old one is retired (aliases, renames,
 *                       retire) before the new one's gate
 *   BROKEN_HEAL_DROPS_RETIRING  HealClaims has no forward case: it removes
 *                       the new one of a dead start-first recreate whose old
 *                       one is retiring (or leaves the retiring one)
 * With both, BROKEN_RETIRE_STOP_UNASKED is the code before 429d227 (README.md,
 * "A bug the lost-answer configurations found"): retire's StopThrough whose
 * answer is lost ends it (OldLeftError), C.meshctl-retiring stays; without
 * it, the fix: retire asks the engine after a failed stop.
 * RETIRE_FAIL (with START_FIRST, and a window): one engine call of a
 * retire (leaveNetworks, StopThrough, removeGone) may fail, once a run: the
 * engine did not do it. retireThrough asks the engine and tries again from
 * what is left. Properties, beside the step's and the end state: once an
 * apply returns, no C.meshctl-retiring runs outside a recorded claim; no
 * gap while nothing is killed and no hold is recorded.
 *   BROKEN_RETIRE_NO_RETRY  a failed try ends the retire (the code before
 *                       c6f0f0a): the old one runs on as C.meshctl-retiring,
 *                       under the aliases, once its apply has returned
 * RETIRE_LEFT (with RETIRE_FAIL): the failure lasts through every try, so
 * the apply leaves C.meshctl-retiring and says so; the next heal (an
 * apply's, or a window's open) removes it before anything is held.
 *   BROKEN_SWEEP_NO_RETIRING  the heal's sweep knows only C.meshctl-old (the
 *                       code before e8ac5b9): the retiring one stays for good
 *                       beside C (the end state)
 *   BROKEN_OPEN_NO_SWEEP  only an apply's heal sweeps, not a window's open
 *                       (the code before aaff465)
 * NET_REPLACE (without RECREATE): C joins a module network whose internal
 * flag every apply's file changes. An apply that finds no hold honoured on
 * C replaces the network under the state lock (ReplaceNetwork), where one
 * engine call may fail, once a run: the engine did not do it. Property,
 * beside the step's: once the replace returns, C is on a network, and
 * running if it ran (what an apply stopped, it puts back).
 *   BROKEN_NO_NET_PUTBACK  a failed call ends the replace (the code before
 *                       522af9b): C stays stopped, or off the network
 * Found by RETIRE_FAIL: a close whose second round replaces a C its first
 * round started does it start-first. A window killed after its renames
 * leaves the old one retiring, running, beside the new one under C.
 *   BROKEN_RELEASE_KEEPS_RETIRING  the stale release puts back only a
 *                       C.meshctl-old (the code before deadCloseAside): it
 *                       removes the new one as unverified, and the next plan
 *                       creates C beside the retiring one, which runs on
 */

#ifndef MAXK
#define MAXK 2
#endif

#ifndef CHANGED_HOLD

#ifndef NO_APPLY_START_IN_FLIGHT
#define APPLY_START_IN_FLIGHT
#endif

/* process numbers: lock owners */
#define W1 1
#define W2 2
#define A  3
#define F  4
#define B  5   /* RECREATE: a second apply, overlapping A */

/* flocks: the owner's number, 0 when free */
byte statelock;   /* "state": apply, and a window's open and close */
byte modlock;     /* "window-module-m": one window per module */
bool winlock[3];  /* "window-<id>": held for the window's whole life */

/* holds.json: a hold per window (on C, with its step container) */
bool hold[3];

/* claims.json: an apply's claim on C while it carries out its plan with
 * the state lock released; alive while its owner holds "claim-<id>" */
bool claim;
byte claimlock;

/* the engine */
bool c_run = 1;     /* C runs (or reads running: a stop is in flight) */
bool c_pol_no;      /* C's restart policy is "no" */
bool c_stopping;    /* a stop of C is in flight; the engine finishes it */
bool step_run;      /* the module's step container runs */
byte crashes;       /* C exits by itself (once, while the killer is at work) */
byte step_owner;    /* ghost: the window whose step container it is */
bool step_live_start; /* ghost: its start completed while that window lived */
bool c_starting;    /* APPLY_START_IN_FLIGHT: a start of a new C in flight */
bool step_starting; /* a start of it is in flight (it reads "created"); the
                     * engine finishes it even if the window dies */
bool restarted;     /* the engine has restarted (once) */
bool listerr;       /* a listing has failed (once) */

#ifdef RECREATE
/* The engine's containers of service C, by slot: nm is the name (NONE:
 * no container), ver the version it was created from; run, stopping,
 * starting, polno as c_run, c_stopping, c_starting, c_pol_no above. */
#define NS 3
#define NONE 255
#define NAMEN 1   /* C */
#define NEWN  2   /* C.meshctl-new (lifecycle.NewName) */
#define OLDN  3   /* C.meshctl-old (lifecycle.OldName) */
byte nm[NS];
byte ver[NS];
bool crun[NS];
bool stopping[NS];
bool starting[NS];
bool polno[NS];
bool healthy2;      /* version 2 passes its health gate */
byte applied = 1;   /* the version applied.json wants */
/* claims.json: claimed[p], the claim of apply p; alive while p holds its
 * lock "claim-<id>", clk[p] */
bool claimed[6];
bool clk[6];
bool claimran[6];   /* the claim says its old C ran (claims.Claim.Ran) */
/* DEFER_CLAIM: claimdef[p], apply p's claim defers a change to C (its
 * Containers name another container, D, which it changes) */
bool claimdef[6];
byte closedwith[3]; /* ghost: the version window w's close last read in applied.json */
/* holds.json: hold w records that an apply reported C deferred during
 * window w (Hold.Deferred, coord.RecordDeferred); a new hold has none */
bool holddef[3];
bool putback;       /* ghost: a close's recreate failed, the old C put back */
bool gaveup;        /* ghost: a close gave up converging after closeRounds */
#define RETN  4   /* C.meshctl-retiring (lifecycle.RetiringName) */
#ifdef START_FIRST
/* the container answers to the service's aliases on its networks (a
 * start-first recreate creates the new one without them: takeAliases gives
 * them once it passed its gate; retire takes the old one off) */
bool alias[NS];
bool booted;        /* ghost: init has made C */
/* ghost: some container of C that passed a gate (version 1, or version 2
 * when it passes) runs, not stopping, under the aliases */
#define SERVES(k) (nm[k] != 0 && crun[k] && !stopping[k] && alias[k] && (ver[k] == 1 || healthy2))
#define SERVED (SERVES(0) || SERVES(1) || SERVES(2))
#endif
#ifdef RETIRE_FAIL
bool efailed;       /* an engine call of a retire has failed (once a run) */
bool efail;         /* ghost: a retire left the old one (the last apply runs again) */
#endif
#ifdef LOST_ANSWER
bool lost;          /* an engine call's answer has been lost (once a run) */
bool efail;         /* ghost: a recreate failed on an engine error (the last apply runs again, as cron would) */
/* LOSE: the engine call just made did what it was asked, and its answer is
 * lost (the caller sees an error), at most once a run; err is the
 * caller's. ASKED: the code asks the engine after a failed rename (Inspect
 * by the new name: it is the container renamed, so no error); GONE:
 * removeGone removes again (not found: gone, no error). */
#define LOSE ; if :: !lost -> lost = 1; err = 1 :: skip fi
#define GONE ; err = 0
#ifdef BROKEN_RENAME_LOST_UNASKED
#define ASKED
#else
#define ASKED ; err = 0
#endif
#endif
#define ANYRUN (crun[0] || crun[1] || crun[2])
#define NRUN (crun[0] + crun[1] + crun[2])
#define C_RUNS (nm[0] == NAMEN && crun[0] || nm[1] == NAMEN && crun[1] || nm[2] == NAMEN && crun[2])
#else
#define C_RUNS c_run
#endif

/* the killer */
bool dead[6];
bool done[6];
byte kills;
bool nokill;

/* ghost: which windows' step container runs (for the safety monitor) */

/* code: a state lock taken (flock: blocks, a kill escapes the wait) */
inline lock_state(me) { atomic { statelock == 0 -> statelock = me } }
inline unlock_state(me) { statelock = 0 }

/* code: engine.Stop: returns once C has stopped; a stop in flight goes on
 * in the engine when the caller dies. */
inline stop_c() {
#ifdef APPLY_START_IN_FLIGHT
	(!c_starting);    /* the engine carries out a start in flight first */
#endif
	atomic { if :: c_run -> c_stopping = 1 :: else fi };
	(!c_stopping)
}

/* code: engine.Start: a running container is left as it is. */
inline start_c() { c_run = 1 }

#ifdef RECREATE
/* k becomes the slot of the container named name, NONE if there is none
 * (a lookup in the caller's listing: names change only under the state
 * lock, a live claim or a live window's hold, so the listing's names are
 * the engine's) */
inline slot(name, k) {
	k = (nm[0] == name -> 0 : (nm[1] == name -> 1 : (nm[2] == name -> 2 : NONE)))
}

/* code: engine.Remove (force: a running container is killed; the engine
 * carries out a start in flight on it first, then the remove) */
inline remove_k(k) {
	atomic { nm[k] = 0; ver[k] = 0; crun[k] = 0; stopping[k] = 0; starting[k] = 0; polno[k] = 0
#ifdef START_FIRST
		; alias[k] = 0
#endif
	}
}

/* code: engine.Start: the request is in the engine, which carries it out
 * even if its sender dies (the container reads created until then); a
 * running container is left as it is. */
inline start_k(k) {
	atomic { if :: nm[k] != 0 && !crun[k] -> starting[k] = 1 :: else fi };
	(!starting[k])
}

/* code: engine.Stop (StopThrough): waits for the engine; a stop in flight
 * goes on when its caller dies; a start in flight is carried out first */
inline stop_k(k) {
	(!starting[k]);
	atomic { if :: nm[k] != 0 && crun[k] -> stopping[k] = 1 :: else fi };
	(!stopping[k])
}

/* code: lifecycle.Executor.Recreate, stop-first, of o (the container under
 * C's name; oldrun: the caller's listing read it running) to version 2:
 * createNew (a leftover C.meshctl-new of ours: Inspect, removeGone, Create
 * again), StopThrough the old one if it ran, Start the new one under its
 * temporary name, renameAside (a leftover C.meshctl-old of ours: Inspect,
 * Remove, Rename again), Rename the new one to C, the health gate; passed:
 * removeGone the old one; failed: PutBack (removeGone the new one, Rename
 * the old one back, Start it if it ran). n, k: the caller's scratch. */
/* the stop-first Recreate: recreate, or recreate_stop_first beside the
 * start-first one (START_FIRST); with LOST_ANSWER, the one below it */
#ifdef START_FIRST
#define RECREATE_STOP_FIRST recreate_stop_first
#else
#define RECREATE_STOP_FIRST recreate
#endif
#ifdef LOST_ANSWER
#define STOPFIRST recreate_no_lost_answer
#define LOSTFIRST RECREATE_STOP_FIRST
#else
#define STOPFIRST RECREATE_STOP_FIRST
#endif
inline STOPFIRST(o, oldrun) {
	atomic { assert(nm[o] == NAMEN); slot(NEWN, k) };
	if :: k != NONE -> remove_k(k) :: else fi;           /* code: createNew: removeGone(leftover) */
	atomic {                                              /* code: createNew: Create C.meshctl-new */
		n = (nm[0] == 0 -> 0 : (nm[1] == 0 -> 1 : (nm[2] == 0 -> 2 : NONE)));
		assert(n != NONE);
		nm[n] = NEWN; ver[n] = 2
#ifdef START_FIRST
		; alias[n] = 1                                    /* (with the service's aliases) */
#endif
	};
	if :: oldrun -> stop_k(o) :: else fi;                 /* code: StopThrough(old) */
	start_k(n);                                           /* code: Start(new) */
	atomic { slot(OLDN, k) };
	if :: k != NONE -> remove_k(k) :: else fi;           /* code: renameAside: Remove(leftover) */
	atomic { assert(nm[o] == NAMEN); nm[o] = OLDN };      /* code: renameAside: Rename(old, C.meshctl-old) */
	atomic { assert(nm[n] == NEWN); nm[n] = NAMEN };      /* code: Rename(new, C) */
	if
	:: healthy2 -> remove_k(o)                            /* code: gate passed; removeGone(old) */
	:: else ->                                            /* code: gate failed; PutBack: */
		remove_k(n);                                      /* code: removeGone(new) */
		atomic { assert(nm[o] == OLDN); nm[o] = NAMEN };  /* code: Rename(old, C) */
		if :: oldrun -> start_k(o) :: else fi             /* code: restart: Start(old) if it ran */
	fi;
	atomic { n = 0; k = 0 }
}

#ifdef LOST_ANSWER
/* The same Recreate where one engine call's answer may be lost (LOSE): the
 * engine did it, the caller sees an error. A StopThrough or Start that
 * fails leads to putBackUnmoved (RemoveNew; putBackName: Inspect the old one
 * by id, renamed back to C if it is not under it; restart if it ran); a
 * rename asks the engine (Executor.rename: Inspect by the new name) and
 * one that was done is no error; removeGone removes again (not found: no
 * error). A rename aside, or to C, that fails (BROKEN_RENAME_LOST_UNASKED
 * only: the code before 2793d10, no asking, no putBackName) leads to
 * putBackUnmoved, or PutBack; a PutBack whose rename back fails returns
 * (the old one stays stopped). */
inline LOSTFIRST(o, oldrun) {
	atomic { assert(nm[o] == NAMEN); slot(NEWN, k) };
	if :: k != NONE -> remove_k(k) :: else fi;           /* code: createNew: removeGone(leftover) */
	atomic {                                              /* code: createNew: Create C.meshctl-new */
		n = (nm[0] == 0 -> 0 : (nm[1] == 0 -> 1 : (nm[2] == 0 -> 2 : NONE)));
		assert(n != NONE);
		nm[n] = NEWN; ver[n] = 2
#ifdef START_FIRST
		; alias[n] = 1
#endif
	};
	if :: oldrun -> stop_k(o) LOSE :: else fi;            /* code: StopThrough(old) */
	if :: !err -> start_k(n) LOSE :: else fi;             /* code: Start(new) */
	if
	:: !err ->
		atomic { slot(OLDN, k) };
		if :: k != NONE -> remove_k(k) :: else fi;       /* code: renameAside: Remove(leftover) */
		atomic { assert(nm[o] == NAMEN); nm[o] = OLDN LOSE ASKED }  /* code: renameAside → rename: Rename(old, C.meshctl-old), Inspect */
	:: else
	fi;
	if
	:: err ->                                             /* code: putBackUnmoved: */
		atomic { efail = 1; err = 0; remove_k(n) };       /* code: RemoveNew: removeGone(new) */
#ifndef BROKEN_RENAME_LOST_UNASKED
		atomic { if :: nm[o] != NAMEN -> nm[o] = NAMEN :: else fi };  /* code: putBackName: Inspect(old), Rename(old, C) if not under it */
#endif
		if :: oldrun -> start_k(o) :: else fi             /* code: restart: Start(old) if it ran */
	:: else ->
		atomic { assert(nm[n] == NEWN); nm[n] = NAMEN LOSE ASKED };  /* code: rename: Rename(new, C), Inspect */
		if
		:: healthy2 && !err -> remove_k(o) LOSE GONE      /* code: gate passed; removeGone(old) */
		:: else ->                                        /* code: gate failed (or the rename); PutBack: */
			atomic { if :: err -> efail = 1 :: else fi; err = 0; remove_k(n) } LOSE GONE;  /* code: removeGone(new) */
			atomic { assert(nm[o] == OLDN); nm[o] = NAMEN LOSE ASKED };  /* code: rename: Rename(old, C), Inspect */
			if
			:: !err && oldrun -> start_k(o) LOSE          /* code: restart: Start(old) if it ran */
			:: else                                       /* (a failed rename back: PutBack returns) */
			fi
		fi
	fi;
	atomic { if :: err -> efail = 1 :: else fi; err = 0; n = 0; k = 0 }
}
#endif

#ifdef START_FIRST
#ifdef RETIRE_FAIL
/* code: lifecycle.Executor.retire of o (C.meshctl-retiring) from what the
 * engine says is left: leaveNetworks while it has the aliases, the drain,
 * StopThrough while it runs, removeGone. One call of these may fail, once a
 * run: the engine did not do it, the caller sees an error (err), and the
 * try ends there. */
inline retire_once(o) {
	if
	:: alias[o] -> if :: !efailed -> efailed = 1; err = 1 :: alias[o] = 0 fi  /* code: leaveNetworks(old) */
	:: else
	fi;
	if
	:: !err && crun[o] -> if :: !efailed -> efailed = 1; err = 1 :: stop_k(o) fi  /* code: StopThrough(old) */
	:: else
	fi;
	if
	:: !err -> if :: !efailed -> efailed = 1; err = 1 :: remove_k(o) fi  /* code: removeGone(old) */
	:: else
	fi
}
#endif
/* code: lifecycle.Executor.recreateStartFirst of o (it runs) to version 2:
 * createNewAs (a leftover C.meshctl-new of ours: removeGone; Create on the
 * networks without the aliases), Start, the gate; passed: takeAliases
 * (DisconnectNetwork, ConnectNetwork with the aliases), rename(old,
 * C.meshctl-retiring), rename(new, C), retire (leaveNetworks of the old
 * one, the drain, StopThrough, removeGone); failed: leaveNetworks of the
 * new one, RemoveNew, the old one untouched. */
inline recreate_start_first(o) {
	atomic { assert(nm[o] == NAMEN); slot(NEWN, k) };
	if :: k != NONE -> remove_k(k) :: else fi;           /* code: createNewAs: removeGone(leftover) */
	atomic {                                              /* code: createNewAs: Create C.meshctl-new, no aliases */
		n = (nm[0] == 0 -> 0 : (nm[1] == 0 -> 1 : (nm[2] == 0 -> 2 : NONE)));
		assert(n != NONE);
		nm[n] = NEWN; ver[n] = 2; alias[n] = 0
	};
#ifdef LOST_ANSWER
	start_k(n) LOSE;                                      /* code: Start(new) */
#else
	start_k(n);                                           /* code: Start(new) */
#endif
#ifdef BROKEN_RETIRE_BEFORE_GATE
	/* the old one retired before the new one's gate */
	alias[n] = 1;                                         /* code: takeAliases */
	atomic { assert(nm[o] == NAMEN); nm[o] = RETN };      /* code: rename(old, C.meshctl-retiring) */
	atomic { assert(nm[n] == NEWN); nm[n] = NAMEN };      /* code: rename(new, C) */
	alias[o] = 0;                                         /* code: retire: leaveNetworks(old) */
	stop_k(o);                                            /* code: retire: StopThrough(old) */
	remove_k(o);                                          /* code: retire: removeGone(old) */
	if
	:: healthy2                                           /* code: gate passed */
	:: else -> remove_k(n)                                /* code: gate failed: RemoveNew */
	fi;
#else
	if
	:: healthy2 && !err ->                                /* code: gate passed */
		/* code: takeAliases: DisconnectNetwork (it has no aliases: no
		 * effect), then: */
		alias[n] = 1;                                     /* code: takeAliases: ConnectNetwork with the aliases */
#ifdef LOST_ANSWER
		/* (the renames ask the engine: with one lost answer they succeed;
		 * their failure paths, RemoveNew and putBackName, are not reached) */
		atomic { assert(nm[o] == NAMEN); nm[o] = RETN LOSE ASKED };  /* code: rename(old, C.meshctl-retiring) */
		atomic { assert(nm[n] == NEWN); nm[n] = NAMEN LOSE ASKED };  /* code: rename(new, C) */
		alias[o] = 0;                                     /* code: retire: leaveNetworks(old); the drain */
		stop_k(o) LOSE;                                   /* code: retire: StopThrough(old) */
#ifdef BROKEN_RETIRE_STOP_UNASKED
		/* the code before 429d227: a StopThrough that fails ends retire
		 * (OldLeftError): the old one stays as C.meshctl-retiring */
		if :: !err -> remove_k(o) LOSE GONE :: else fi   /* code: retire: removeGone(old) */
#else
		/* the fix (429d227): a StopThrough that fails is asked of the
		 * engine (Inspect: it is not running), and the old one goes */
		err = 0;                                          /* code: retire: Inspect(old) */
		remove_k(o) LOSE GONE                             /* code: retire: removeGone(old) */
#endif
#else
		atomic { assert(nm[o] == NAMEN); nm[o] = RETN };  /* code: rename(old, C.meshctl-retiring) */
		atomic { assert(nm[n] == NEWN); nm[n] = NAMEN };  /* code: rename(new, C) */
#ifdef RETIRE_FAIL
		retire_once(o);                                   /* code: retireThrough: retire */
#if !defined(BROKEN_RETIRE_NO_RETRY) && !defined(RETIRE_LEFT)
		/* the fix: a failed try is asked of the engine (Inspect) and tried
		 * again from what is left (one failure a run: the second try ends it) */
		if :: err -> err = 0; retire_once(o) :: else fi   /* code: retireThrough: Inspect(old), retire again */
#endif
		/* what is left is reported (OldLeftError); the apply exits 1, and
		 * the next cron run applies again */
		atomic { if :: err -> efail = 1 :: else fi; err = 0 }
#else
		alias[o] = 0;                                     /* code: retire: leaveNetworks(old); the drain */
		stop_k(o);                                        /* code: retire: StopThrough(old) */
		remove_k(o)                                       /* code: retire: removeGone(old) */
#endif
#endif
	:: else ->                                            /* code: gate failed: leaveNetworks(new) (no aliases) */
		remove_k(n)                                       /* code: RemoveNew: removeGone(new) */
	fi;
#endif
#ifdef LOST_ANSWER
	atomic { if :: err -> efail = 1 :: else fi; err = 0; n = 0; k = 0 }
#else
	atomic { n = 0; k = 0 }
#endif
}

/* code: Recreate: start-first when the old one runs (startsFirst), else
 * stop-first */
inline recreate(o, oldrun) {
	if
	:: oldrun -> recreate_start_first(o)
	:: else -> recreate_stop_first(o, oldrun)
	fi
}
#endif

#ifdef BROKEN_OPEN_NO_SWEEP
#define OPEN_SWEEPS && (who == A || who == B || who == F)
#else
#define OPEN_SWEEPS
#endif
/* code: coord.HealClaims, under the state lock, when mine (the
 * caller may heal C): a leftover C.meshctl-new of ours is removed (begun);
 * for a dead claim on C (every recorded claim is dead here: the caller
 * checked, under this lock): one aside is put back (PutBack: the one under
 * C removed, the one aside renamed back and started), else an old C
 * stopped where a new one was removed is started (StartOld); claims.json
 * is written without them; the engine is listed again if anything moved.
 * (Claims are per container name: one name here, so the dead claims are
 * healed as one.) who is the caller: W1, W2, A, B or F. */
inline heal_dead(mine, who) {
	if
	:: mine ->
#ifdef START_FIRST
		/* code: forward: a dead claim on C with C.meshctl-retiring there
		 * (a start-first recreate whose new one passed its gate): its
		 * new one is kept */
		atomic { slot(RETN, r); fwd = (r != NONE && (claimed[A] || claimed[B] || claimed[F])) };
#ifdef BROKEN_HEAL_DROPS_RETIRING
		fwd = 0;
#endif
		atomic { slot(NEWN, k) };
		if :: k != NONE && !fwd -> remove_k(k); begun = 1 :: else fi;  /* code: removeGone(C.meshctl-new) */
#else
		atomic { slot(NEWN, k) };
		if :: k != NONE -> remove_k(k); begun = 1 :: else fi;  /* code: removeGone(C.meshctl-new) */
#endif
#if defined(START_FIRST) && !defined(BROKEN_SWEEP_NO_RETIRING)
		/* code: removeLeftAside: a C.meshctl-retiring that no recorded
		 * claim names is what a retire could not remove: it goes, stopped
		 * first, while a container is under C; else, running, it takes C
		 * back (BROKEN_OPEN_NO_SWEEP: only an apply's heal does this) */
		atomic { slot(RETN, r); slot(NAMEN, o) };
		if
		:: r != NONE && !(claimed[A] || claimed[B] || claimed[F]) OPEN_SWEEPS ->
			if
			:: o != NONE -> stop_k(r); remove_k(r)       /* code: removeAside: StopThrough, RemoveGone */
			:: o == NONE && crun[r] -> nm[r] = NAMEN     /* code: Rename(retiring, C) */
			:: else
			fi;
			begun = 1
		:: else
		fi;
		atomic { r = 0; o = 0 };
#endif
		if
		:: claimed[A] || claimed[B] || claimed[F] ->
			atomic { slot(OLDN, k); slot(NAMEN, o) };
			if
#ifdef START_FIRST
			:: fwd ->                                     /* code: finishStartFirst */
				if
				:: o == NONE ->
					atomic { slot(NEWN, k) };
					if
					:: k == NONE ->                       /* no new one left: */
						atomic { nm[r] = NAMEN; o = r };  /* code: rename(retiring, C) */
						start_k(o)                        /* code: StartOld */
					:: else ->
						atomic { nm[k] = NAMEN }          /* code: rename(new, C) */
					fi
				:: else
				fi;
				if
				:: nm[r] == RETN ->
					stop_k(r);                            /* code: StopThrough(retiring) */
					remove_k(r)                           /* code: removeGone(retiring) */
				:: else
				fi;
				atomic { begun = 1; r = 0; fwd = 0 }
#endif
			:: k != NONE ->
#ifndef BROKEN_NO_HEAL_ASIDE
				if :: o != NONE -> remove_k(o) :: else fi;    /* code: PutBack: removeGone(new) */
				atomic { nm[k] = NAMEN; o = k };              /* code: PutBack: Rename(old, C) */
				start_k(o);                                   /* code: PutBack: restart (aside.Running = true) */
				begun = 1
#else
				skip
#endif
			:: else ->
				if
#ifdef BROKEN_HEAL_TRUSTS_LISTING
				:: o != NONE && begun && !obs_c -> start_k(o); begun = 1 /* code: StartOld */
#else
				/* the fix (58067ee): the claim says whether its old C ran; if
				 * it did, it is stopped (which waits for a stop its dead
				 * apply left in flight) and started, whatever the listing
				 * said */
				:: o != NONE && (claimran[A] || claimran[B] || claimran[F]) -> stop_k(o); start_k(o); begun = 1
#endif
				:: else
				fi
			fi;
			atomic { claimed[A] = 0; claimed[B] = 0; claimed[F] = 0; claimran[A] = 0; claimran[B] = 0; claimran[F] = 0 }  /* code: lock.Write(claims.json) */
		:: else
		fi;
		if
		:: begun -> atomic { obs_c = C_RUNS }                 /* code: List again (changed) */
		:: else
		fi
	:: else
	fi;
	atomic { begun = 0; o = 0; k = 0 }
}
#endif

/* code: holds.Liveness.Classify: every window's lock first, then one engine
 * listing (lifecycle.Observe). h1,h2 are the holds read; s1,s2 become whether
 * each is stale. obs_c, obs_step are the listing. */
inline classify() {
#ifdef BROKEN_LIST_FIRST
	atomic { obs_c = C_RUNS; obs_step = step_run };
	a1 = winlock[1];
	a2 = winlock[2];
#else
	a1 = winlock[1];
	a2 = winlock[2];
	/* the listing, or (once, while the killer is at work) an engine error:
	 * lifecycle.ObserveWindows then returns a ListingError and the command
	 * fails, releasing nothing, planning nothing (fail closed) */
	if
#ifndef NO_LIST_ERROR
	:: !nokill && !listerr -> atomic { listerr = 1; lerr = 1 }
#endif
	:: atomic { obs_c = C_RUNS; obs_step = step_run }
	fi;
#endif
#ifdef BROKEN_UNKNOWN_STALE
	lerr = 0;  /* the code carries on as if the listing were empty */
#endif
	/* stateOf: alive → open; else step container (EXEC_STEP: a process of
	 * the step's group) runs → orphaned; else stale */
#ifdef BROKEN_EXEC_NO_GROUP
	s1 = h1 && !a1;
	s2 = h2 && !a2
#else
	s1 = h1 && !a1 && !obs_step;
	s2 = h2 && !a2 && !obs_step
#endif
}

#ifdef RECREATE
/* code: coord.ReleaseStale → releaseStale: removeDeadSteps;
 * removeDeadNews (a dead close's new container under its temporary name,
 * perhaps running, goes first); putBackAside (one aside: the one under C
 * removed, the one aside renamed back, stopped); finishDeadStop (settle);
 * BringBack; holds.json written. */
inline release_stale() {
	if
	:: s1 || s2 ->
#ifndef BROKEN_STEP_REMOVED_LATE
		atomic { assert(!(step_run && step_live_start)); step_starting = 0; step_run = 0 };  /* code: removeDeadSteps */
#endif
#ifndef BROKEN_RELEASE_KEEPS_NEW
		atomic { slot(NEWN, k) };
		if :: k != NONE -> remove_k(k); begun = 1 :: else fi;  /* code: removeDeadNews: RemoveNew (moved) */
#endif
		atomic { slot(OLDN, k); slot(NAMEN, o) };
#if defined(START_FIRST) && !defined(BROKEN_RELEASE_KEEPS_RETIRING)
		/* code: deadCloseAside: or C.meshctl-retiring, a dead close's
		 * start-first recreate's old one (running) */
		atomic { if :: k == NONE -> slot(RETN, k) :: else fi };
#endif
		if
		:: k != NONE ->                                   /* code: putBackAside → PutBack: */
			if :: o != NONE -> remove_k(o) :: else fi;    /* code: removeGone(new) */
			atomic { nm[k] = NAMEN; o = k; obs_c = 0; begun = 1 }  /* code: Rename(old, C); it is stopped */
		:: else
		fi;
		assert(o != NONE);
		if
		:: obs_c && polno[o] -> stop_k(o)                 /* code: finishDeadStop: Inspect, Stop */
#ifndef BROKEN_RELEASE_POLICY_ONLY
		/* the fix (6652623): a dead close's recreate had begun (its new one
		 * was removed): the stop it sent may be in flight, whatever C's
		 * policy (restored by a first round of the close) */
		:: obs_c && !polno[o] && begun -> stop_k(o)
#endif
		:: else
		fi;
		polno[o] = 0;                                     /* code: BringBack: SetRestart */
		start_k(o);                                       /* code: BringBack: Start */
		atomic {                                          /* code: lock.Write(holds.json) (and history) */
			if :: s1 -> hold[1] = 0 :: else fi;
			if :: s2 -> hold[2] = 0 :: else fi;
			o = 0; k = 0
		};
		/* Release: a container moved (a new one removed, one put back):
		 * List again; else back[C] = true */
		atomic { if :: begun -> obs_c = C_RUNS :: else -> obs_c = 1 fi; begun = 0 }
	:: else
	fi
}
#else
/* code: coord.ReleaseStale: each stale hold's C brought back as the
 * close would (settle, BringBack), then holds.json written without them. */
inline release_stale() {
	if
	:: s1 || s2 ->
#if !defined(BROKEN_STEP_REMOVED_LATE) && !defined(EXEC_STEP)
		/* code: removeDeadSteps, before anything comes back: a start of the
		 * step container that its dead window sent may still be under way;
		 * the engine does a container's start and remove one after the
		 * other, so once the remove returns the step neither runs nor can
		 * start (a remove that fails fails the release: not modelled) */
		atomic {
			/* a step that started while its window lived is never one a
			 * release finds stale: it is in the listing, made after the
			 * window's lock was found free */
			assert(!(step_run && step_live_start));
			step_starting = 0; step_run = 0
		};
#endif
		/* code: settle: a C that reads running with policy "no" has a stop
		 * in flight from its dead window: Stop waits for it. */
#ifndef BROKEN_NO_SETTLE
		if
		:: obs_c && c_pol_no -> stop_c()   /* code: Inspect, then Stop */
		:: else
		fi;
#endif
		c_pol_no = 0;                      /* code: BringBack: SetRestart */
		start_c();                         /* code: BringBack: Start */
		obs_c = 1;                         /* back[C] = true */
		atomic {                           /* code: lock.Write(holds.json) (and history) */
			if :: s1 -> hold[1] = 0 :: else fi;
			if :: s2 -> hold[2] = 0 :: else fi
		}
	:: else
	fi
}
#endif

/* forget clears a process's copies of what it read, once it no longer
 * needs them: the model's state, not the protocol's. */
inline forget() { h1 = 0; h2 = 0; a1 = 0; a2 = 0; s1 = 0; s2 = 0; obs_c = 0; obs_step = 0; lerr = 0 }

#ifdef RECREATE
/* forget_all also clears what a process keeps across its steps (at its
 * death) */
inline forget_all() { forget(); atomic { o = 0; n = 0; k = 0; hc = 0; oldrun = 0; begun = 0; w = 0; atopen = 0; want = 0; round = 0; err = 0; dfr = 0
#ifdef START_FIRST
	; r = 0; fwd = 0
#endif
} }

/* code: coord.RecordDeferred, under the state lock: the plan reported C
 * deferred (it is not at version 2) while window w holds it; holds.json
 * records that in w's hold, before applied.json is written */
inline defer_record(w) {
	atomic { slot(NAMEN, k); if :: k == NONE || ver[k] != 2 -> holddef[w] = 1 :: else fi; k = 0 }
}

/* One apply (RECREATE): apply.runLocked. takeLock: another apply's live
 * claim → unlock, coord.WaitClaim, again (Run); observe; heal (coord.HealClaims:
 * C is the apply's unless a hold, stale or not, holds it); release; plan
 * (the release comes first here: the code plans again after it); execute:
 * C held → deferred, recorded under this lock; C at version 2 and running
 * → unchanged; else executeClaimed: coord.TakeClaim, the state lock released,
 * Recreate, the state lock again, record, Held.Release. */
inline apply_pass(me) {
	do
	:: lock_state(me);                     /* code: d.Lock(state) */
		if                                 /* code: takeLock: claims.LiveOf */
#ifndef BROKEN_APPLY_NO_WAIT
		:: me != A && (claimed[A] || claimdef[A]) && clk[A] -> atomic { unlock_state(me); w = A }; (!clk[w]); w = 0  /* code: coord.WaitClaim */
		:: me != B && (claimed[B] || claimdef[B]) && clk[B] -> atomic { unlock_state(me); w = B }; (!clk[w]); w = 0
#endif
		:: else -> break
		fi
	od;
	atomic { h1 = hold[1]; h2 = hold[2] }; /* code: holds.Read */
	classify();
#ifdef BROKEN_HEAL_IGNORES_HOLDS
	heal_dead(1, me);
#else
	heal_dead(!h1 && !h2, me);
#endif
	release_stale();
	if
	:: (h1 && !s1) || (h2 && !s2) ->       /* code: Plan: held, or deferred (version 1 under a hold) */
#ifdef DEFER_CLAIM
		/* code: executeClaimed: the plan also changes another container D:
		 * coord.TakeClaim (Containers D, Defers C), the state lock released,
		 * D's recreate, the state lock again, record, Held.Release */
		atomic { clk[me] = 1; claimdef[me] = 1; w = (h1 && !s1 -> W1 : W2) };
		atomic { unlock_state(me); forget() };
		skip;                              /* code: execute: Recreate D (its health wait included) */
		lock_state(me);
		/* a deferred change is carried out by the close of the window that
		 * held C, or that window is still there (its hold stays) */
		defer_record(w);                   /* code: record: coord.RecordDeferred */
		atomic { assert(hold[w] || gaveup || closedwith[w] == 2); applied = 2 };  /* code: record: lock.Write(applied.json) */
		atomic { claimdef[me] = 0; clk[me] = 0; w = 0 };  /* code: Held.Release */
		unlock_state(me)
#else
		w = (h1 && !s1 -> W1 : W2);
		defer_record(w);                   /* code: record: coord.RecordDeferred */
		atomic { applied = 2; unlock_state(me); forget(); w = 0 }  /* code: record: lock.Write(applied.json) */
#endif
	:: else ->
#if defined(LOST_ANSWER) || defined(START_FIRST)
		atomic { slot(NAMEN, o) };
		if
		:: o == NONE ->                    /* code: Plan: create (C is missing; only a broken variant gets here) */
			atomic {                       /* code: Create C (here under the state lock) */
				n = (nm[0] == 0 -> 0 : (nm[1] == 0 -> 1 : (nm[2] == 0 -> 2 : NONE)));
				assert(n != NONE);
				nm[n] = NAMEN; ver[n] = 2
#ifdef START_FIRST
				; alias[n] = 1
#endif
			};
			start_k(n);                    /* code: Start */
			if :: !healthy2 -> remove_k(n) :: else fi;  /* code: the gate; failed: Remove */
			atomic { applied = 2; unlock_state(me); forget(); n = 0 }
		:: else ->
#else
		atomic { slot(NAMEN, o); assert(o != NONE) };
#endif
		if
		:: ver[o] != 2 || !obs_c ->        /* code: Plan: recreate (a version 1, or stopped) */
			atomic { clk[me] = 1; claimed[me] = 1; claimran[me] = obs_c };  /* code: coord.TakeClaim: its lock, claims.json */
			atomic { oldrun = obs_c; unlock_state(me); forget() };
			recreate(o, oldrun);           /* code: execute → change → Recreate */
			lock_state(me);                /* code: executeClaimed: d.Lock(state) again */
			applied = 2;                   /* code: record: lock.Write(applied.json) */
			atomic { claimed[me] = 0; claimran[me] = 0; clk[me] = 0 };  /* code: Held.Release: claims.json, its lock */
			atomic { unlock_state(me); o = 0; oldrun = 0 }
		:: else ->                         /* code: Plan: unchanged; record */
			atomic { applied = 2; unlock_state(me); forget(); o = 0 }
		fi
#if defined(LOST_ANSWER) || defined(START_FIRST)
		fi
#endif
	fi
}
#else
inline forget_all() { forget() }

#ifdef NET_REPLACE
/* the module network C joins: net is 0 (none), 1 (the old one: internal
 * false) or 2 (the new one the file asks for: internal true); C is on it
 * (c_on) or not */
byte net = 1;
bool c_on = 1;
bool nfailed;       /* an engine call of the replace has failed (once a run) */
bool nstopped;      /* ghost: this replace stopped C, and nothing started it since */
/* NFAIL(do): the engine call does it, or (once a run) fails: the engine
 * did not do it, the caller sees an error (err) */
#define NFAIL(do) if :: !nfailed -> nfailed = 1; err = 1 :: atomic { do } fi
/* code: lifecycle.Executor.ReplaceNetwork, under the state lock, once
 * checkReplaceable found no hold honoured on C: replaceNetwork (C stopped
 * if it ran, taken off, the network removed, created anew, C connected,
 * started if it ran) up to the first call that fails; then putBackNetwork:
 * EnsureNetworks (the new one if there, else the old one made again), C
 * on it again, started if it ran and stopped. ran: the listing read C
 * running. */
inline net_replace(ran) {
	nstopped = 0;                                         /* (this replace's) */
	if :: ran -> (!c_starting); NFAIL(c_stopping = 1); (!c_stopping); if :: !err -> nstopped = 1 :: else fi :: else fi;  /* code: StopThrough */
	if :: !err -> NFAIL(c_on = 0) :: else fi;             /* code: DisconnectNetwork */
	if :: !err -> NFAIL(net = 0) :: else fi;              /* code: RemoveNetwork */
	if :: !err -> NFAIL(net = 2) :: else fi;              /* code: CreateNetwork */
	if :: !err -> NFAIL(c_on = 1) :: else fi;             /* code: ConnectNetwork, with its aliases */
	if :: !err && ran -> NFAIL(c_run = 1; nstopped = 0) :: else fi;  /* code: Start */
#ifndef BROKEN_NO_NET_PUTBACK
	if
	:: err ->                                            /* code: putBackNetwork */
		atomic { if :: net == 0 -> net = 1 :: else fi };  /* code: EnsureNetworks, InspectNetwork */
		c_on = 1;                                         /* code: putBackOn: ConnectNetwork if off */
		if :: ran && !c_run -> atomic { c_run = 1; nstopped = 0 } :: else fi  /* code: putBackOn: Start, WaitHealthy */
	:: else
	fi;
#endif
	/* what an apply stopped, it puts back before it exits */
	assert(!nstopped && c_on && net != 0);
	err = 0
}
#endif

/* One apply: apply.runLocked, and executeClaimed: a plan that changes C is
 * carried out with the state lock released, under a claim on C. */
inline apply_pass(me) {
	lock_state(me);                        /* code: d.Lock(state) */
	/* code: claims.Live: another apply's claim would make this one wait;
	 * A and F never overlap here, so there is none */
	atomic { h1 = hold[1]; h2 = hold[2] }; /* code: holds.Read */
#ifdef BROKEN_APPLY_WAITS
	(modlock == 0);
#endif
	classify();
#ifdef BROKEN_NO_RELEASE
	if :: me == F -> s1 = 0; s2 = 0 :: else fi;
#endif
	if
	:: lerr -> atomic { unlock_state(me); forget() }  /* the apply fails: ListingError */
	:: else ->
	release_stale();
#ifdef NET_REPLACE
	/* code: createNetworks, then the replace of a changed one, under the
	 * state lock: refused while a hold honoured holds C (checkReplaceable) */
	if
	:: net == 0 -> net = 2                             /* code: EnsureNetworks: CreateNetwork */
	:: net == 1 && !((h1 && !s1) || (h2 && !s2)) -> net_replace(obs_c); obs_c = c_run
	:: else
	fi;
#endif
	/* code: Plan: C held by a hold still honoured → held (untouched);
	 * else stopped → recreate (the host's rule), running → unchanged. */
	if
	:: !((h1 && !s1) || (h2 && !s2)) && !obs_c ->
		/* code: executeClaimed: coord.TakeClaim (the claim's lock, then
		 * claims.json), the state lock released, execute: Recreate (the
		 * old C reads stopped; renamed aside; a new C created and started
		 * with the desired policy), the state lock again */
		claimlock = me;
		claim = 1;
		atomic { unlock_state(me); forget() };
#ifdef APPLY_START_IN_FLIGHT
		atomic { c_pol_no = 0; c_stopping = 0; c_starting = 1
#ifdef NET_REPLACE
			; c_on = 1                     /* (created on the network) */
#endif
		};  /* Create, Start sent */
		(!c_starting);                     /* ... and done */
#else
		atomic { c_run = 1; c_pol_no = 0; c_stopping = 0 };
#endif
		lock_state(me);
		/* code: record: lock.Write(applied.json, last-apply.json) (no shared effect) */
		claim = 0;                         /* code: Held.Release: claims.json */
		claimlock = 0;                     /* ... and the claim's lock */
		unlock_state(me)
	:: else ->
		/* code: record: lock.Write(applied.json, last-apply.json) (no shared effect) */
		atomic { unlock_state(me); forget() }
	fi
	fi
}

#endif

/* a process's copies of what it read, and (RECREATE) the containers it
 * works on */
#ifdef RECREATE
#ifdef START_FIRST
#define LOCALS bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, lerr; byte o, n, k, hc, w, atopen, want, round, r; bool oldrun, begun, err, fwd, dfr
#else
#define LOCALS bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, lerr; byte o, n, k, hc, w, atopen, want, round; bool oldrun, begun, err, dfr
#endif
#else
#ifdef NET_REPLACE
#define LOCALS bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, lerr, err
#else
#define LOCALS bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, lerr
#endif
#endif

/* The cleanup of a killed process: the kernel drops its flocks. */
inline die(me) {
	atomic {
		if :: statelock == me -> statelock = 0 :: else fi;
		if :: modlock == me -> modlock = 0 :: else fi;
		if :: claimlock == me -> claimlock = 0 :: else fi;
#ifdef RECREATE
		clk[me] = 0;
#endif
		if :: me == W1 || me == W2 -> winlock[me] = 0 :: else fi;
		done[me] = 1
	}
}

proctype Window(byte me) {
	LOCALS;
	{
		/* code: Run: the module lock, or busy (exit 3) */
		if
		:: atomic { modlock == 0 -> modlock = me }
		:: atomic { modlock != 0 -> done[me] = 1 }; goto gone
		fi;
		winlock[me] = 1;                   /* code: Run: the window's own lock */
		/* code: prepareStep: the step image is present (no lock, no state) */

		/* code: open → recordUnclaimed → record, under the state lock */
record:
		lock_state(me);
#ifndef BROKEN_NO_CLAIM_CHECK
		/* code: checkClaims (claims.Covering): a live apply claim on C →
		 * unlock, coord.WaitClaim for its lock, record again */
		if
#ifdef RECREATE
		:: claimed[A] && clk[A] -> unlock_state(me); (!clk[A]); goto record
		:: claimed[B] && clk[B] -> unlock_state(me); (!clk[B]); goto record
#else
		:: claim && claimlock != 0 ->
			unlock_state(me);
			(claimlock == 0);
			goto record
#endif
		:: else
		fi;
#endif
		atomic { h1 = hold[1]; h2 = hold[2] };
		classify();
		/* the listing failed: the window fails before it holds anything;
		 * a hold on this module still honoured: busy */
		if
		:: lerr || (h1 && !s1) || (h2 && !s2) -> atomic { unlock_state(me); forget() }; goto closed
		:: else
		fi;
#ifdef RECREATE
		/* code: healDead: C is this window's to heal unless another
		 * window's hold (a stale one, here) holds it: Release does */
#ifndef BROKEN_OPEN_NO_HEAL
		heal_dead(me == W1 && !h2 || me == W2 && !h1, me);
#endif
		release_stale();
		/* code: holdOf: Inspect C; what applied.json wants now (atOpen) */
		atomic { slot(NAMEN, hc); assert(hc != NONE); atopen = applied };
		atomic { hold[me] = 1; holddef[me] = 0 }  /* code: lock.Write(holds.json): nothing deferred yet */
		unlock_state(me);
		polno[hc] = 1;                     /* code: open: SetRestart(no) */
		forget(); stop_k(hc);              /* code: StopThrough, whatever the listing said */
#else
		release_stale();
		/* code: Inspect C (its restart policy, for the hold) (no shared effect) */
		hold[me] = 1;                      /* code: lock.Write(holds.json): the hold, with its step container */
		unlock_state(me);
#ifdef BROKEN_STOP_FIRST
		forget(); stop_c();
#endif
		c_pol_no = 1;                      /* code: open: SetRestart(no), restart policy first */
#ifndef BROKEN_STOP_FIRST
		if
		:: obs_c -> forget(); stop_c()     /* code: Stop (waits for the engine) */
#ifndef BROKEN_OPEN_STOPS_LISTED
		/* code: stop whatever the listing said; the engine carries out a
		 * start in flight on the container before the stop */
		:: else -> forget(); stop_c()
#else
		:: else -> forget()
#endif
		fi;
#endif
#endif

		/* code: runStep → runContainer: Inspect/Remove a leftover, Create, Start, Wait */
		/* code: Create the step container (no shared effect) */
#ifdef EXEC_STEP
		/* code: runExec: cmd.Start, in the guard's process group (started
		 * before the hold, which names the group): it returns once the step
		 * runs; nothing is in flight. The step runs on after its window
		 * dies until the guard (or it) ends it: the engine's "step ends". */
		atomic { step_run = 1; step_owner = me; step_live_start = 1 }
#else
		atomic { step_starting = 1; step_owner = me }  /* code: Start it: the request is in the engine */
		(!step_starting);                  /* ... and returns once the step runs */
#endif
#ifndef BROKEN_HOLD_EARLY
		(!step_run);                       /* code: Wait: the step exits (or is killed at its timeout) */
		/* code: Remove the step container (no shared effect) */

		/* code: close → stepStopped: one listing; still running → keep the hold */
		if
		:: step_run -> goto closed
		:: else
		fi;
#endif
#ifdef RECREATE
		/* code: close → bringBackConverged: appliedNow, bringBack (no lock
		 * held), lockToClose, appliedNow again: changed meanwhile → again
		 * (once: applied.json moves from 1 to 2 once) */
		do
		:: atomic { dfr = holddef[me]; want = applied; slot(NAMEN, o); assert(o != NONE); oldrun = crun[o] };  /* code: wishNow (coord.DeferredIn, appliedNow); bringBack: List */
			if
#ifdef BROKEN_CLOSE_AT_OPEN
			:: want != ver[o] && want != atopen ->    /* the code before: a change since the open */
#else
			:: want != ver[o] && dfr ->               /* code: bringOne: drift, and its hold records an apply's deferral */
#endif
				recreate(o, oldrun);                  /* code: Recreate */
#ifdef LOST_ANSWER
				/* code: failed: Inspect(C): the old one back under C →
				 * BringBack; else nothing started, the hold kept */
				if
				:: nm[o] == NAMEN -> putback = 1; polno[o] = 0; start_k(o)  /* code: BringBack: SetRestart, Start */
				:: nm[o] == 0                         /* replaced: the old one removed */
				:: else -> goto closed                /* not back under its name */
				fi
#else
				if
				:: !healthy2 ->                       /* code: Inspect(C): the old one is back under C */
					putback = 1; polno[o] = 0; start_k(o)  /* code: BringBack: SetRestart, Start */
				:: else
				fi
#endif
			:: else ->
				polno[o] = 0;                         /* code: BringBack: SetRestart(policy) */
				start_k(o)                            /* code: BringBack: Start */
			fi;
			lock_state(me);                           /* code: lockToClose */
			/* code: claims.Deferring: a live claim that defers a change to
			 * C → unlock, coord.WaitClaim; waited: again (round < closeRounds),
			 * else lockToClose */
#if defined(DEFER_CLAIM) && !defined(BROKEN_CLOSE_NO_DEFERRING)
			atomic { w = (claimdef[A] && clk[A] -> A : (claimdef[B] && clk[B] -> B : 0)) };
#endif
			if
			:: w != 0 ->
				unlock_state(me);
				(!clk[w]);
				w = 0;
				if
				:: round < 2 -> round++; goto nextround
				:: else -> lock_state(me)
				fi
			:: else
			fi;
			/* code: wishNow, changedMeanwhile: unchanged, and no deferral
			 * recorded meanwhile → done; changed in the last round → gives up
			 * (the next apply converges it) */
			if
			:: applied == want && holddef[me] == dfr -> break
			:: else ->
				if
				:: round == 2 -> gaveup = 1; break
				:: else -> atomic { round++; unlock_state(me); o = 0; oldrun = 0 }
				fi
			fi;
nextround:
			skip
		od;
		/* what an apply reported deferred is what runs once the hold goes,
		 * unless the recreate failed (the old C put back) or the close gave
		 * up after closeRounds */
		atomic { slot(NAMEN, k); assert(!dfr || putback || gaveup || k != NONE && ver[k] == want); k = 0 };
		atomic { closedwith[me] = want; hold[me] = 0; holddef[me] = 0; o = 0; oldrun = 0; hc = 0; want = 0; atopen = 0; round = 0; dfr = 0 }  /* code: lock.Write(holds.json) */
#else
		/* code: close → bringBack, no lock held: List, then BringBack */
		/* code: List (no shared effect) */
		c_pol_no = 0;                      /* code: SetRestart(policy) */
		start_c();                         /* code: Start */
		lock_state(me);                    /* code: lockToClose */
		/* code: re-read applied.json: no newer change (no shared effect) */
		hold[me] = 0;                      /* code: lock.Write(holds.json): the hold dropped */
#endif
		/* code: lock.Write(windows-history.json) (no shared effect) */
		unlock_state(me);
closed:
		atomic { modlock = 0; winlock[me] = 0; done[me] = 1 }
	} unless { dead[me] };
	if
	:: dead[me] -> atomic { die(me); forget_all() }
	:: else
	fi;
gone:
	skip
}

proctype Apply(byte me) {
	LOCALS;
	{
		apply_pass(me);
#if defined(RETIRE_FAIL) && !defined(RETIRE_LEFT)
		/* once an apply returns, no C.meshctl-retiring runs outside a
		 * recorded claim (an apply's, live or dead) or a recorded hold
		 * (a close's recreate) */
		atomic { slot(RETN, k); assert(k == NONE || !crun[k] || claimed[A] || claimed[B] || claimed[F] || hold[1] || hold[2]); k = 0 };
#endif
		atomic { done[me] = 1 }
	} unless { dead[me] };
	if
	:: dead[me] -> atomic { die(me); forget_all() }
	:: else
	fi
}

/* The next apply, once nothing is killed any more and the others have
 * ended; like cron, it runs again while a hold remains, each time once the
 * engine has moved on (a step container exited). */
proctype LastApply() {
	LOCALS;
	(nokill && done[W1] && done[W2] && done[A] && done[B]);
	do
	:: apply_pass(F);
		if
		:: hold[1] || hold[2] -> (!step_run)
#if defined(LOST_ANSWER) || defined(RETIRE_FAIL)
		:: efail -> efail = 0              /* a recreate failed on an engine error: again */
#endif
		:: else -> break
		fi
	od;
#ifdef RECREATE
	/* Once the engine has carried out what it was asked: exactly one
	 * container of C, under its name, running the last version that passed
	 * its gate. */
	(!starting[0] && !starting[1] && !starting[2] && !stopping[0] && !stopping[1] && !stopping[2]);
	atomic { slot(NAMEN, o);
		assert(o != NONE && crun[o] && ver[o] == (healthy2 -> 2 : 1) && (nm[0] != 0) + (nm[1] != 0) + (nm[2] != 0) == 1
#ifdef START_FIRST
			&& alias[o]
#endif
		) };
#endif
	done[F] = 1
}

active proctype Engine() {
end:
	do
#ifdef RECREATE
	:: atomic { stopping[0] -> crun[0] = 0; stopping[0] = 0 }  /* a stop completes */
	:: atomic { stopping[1] -> crun[1] = 0; stopping[1] = 0 }
	:: atomic { stopping[2] -> crun[2] = 0; stopping[2] = 0 }
	:: atomic { starting[0] -> crun[0] = 1; starting[0] = 0 }  /* a start completes */
	:: atomic { starting[1] -> crun[1] = 1; starting[1] = 0 }
	:: atomic { starting[2] -> crun[2] = 1; starting[2] = 0 }
#else
	:: atomic { c_stopping -> c_run = 0; c_stopping = 0 }  /* a stop completes */
	:: atomic { crashes == 0 && !nokill && c_run && !c_stopping -> c_run = 0; crashes = 1 } /* C exits */
#endif
	:: atomic { step_run -> step_run = 0 }                  /* the step ends, or is killed */
#if defined(APPLY_START_IN_FLIGHT) && !defined(RECREATE)
	:: atomic { c_starting -> c_run = 1; c_starting = 0 }  /* a start of C completes */
#endif
	:: atomic { step_starting -> step_run = 1; step_starting = 0;  /* a start completes */
	            step_live_start = winlock[step_owner] }
#ifndef NO_ENGINE_RESTART
	:: atomic { !restarted && !c_run && !c_stopping && !c_pol_no ->  /* dockerd restarts: */
	            c_run = 1; restarted = 1 }                       /* C's policy is "always" */
#endif
	od
}

active proctype Killer() {
	do
	:: kills < MAXK ->
		if
		:: atomic { !done[W1] && !dead[W1] -> dead[W1] = 1 }
		:: atomic { !done[W2] && !dead[W2] -> dead[W2] = 1 }
		:: atomic { !done[A] && !dead[A] -> dead[A] = 1 }
#ifdef RECREATE
		:: atomic { !done[B] && !dead[B] -> dead[B] = 1 }
#endif
		:: else -> skip
		fi;
		kills++
	:: break
	od;
	nokill = 1
}

/* Safety: no held container is started or recreated while its step runs. */
active proctype Monitor() {
end:
#ifdef RECREATE
	/* and never two containers of C run at once */
	do
	:: atomic { step_run && ANYRUN -> assert(!(step_run && ANYRUN)) }
#ifdef START_FIRST
	/* start-first: no gap while nothing is killed and no hold is recorded
	 * (two containers of C run during the overlap, by design) */
	:: atomic { booted && !dead[A] && !dead[B] && !dead[W1] && !dead[W2] && !hold[1] && !hold[2] && !SERVED -> assert(dead[A] || dead[B] || dead[W1] || dead[W2] || hold[1] || hold[2] || SERVED) }
#else
	:: atomic { NRUN > 1 -> assert(NRUN <= 1) }
#endif
	od
#else
	atomic { (step_run && c_run) -> assert(false) }
#endif
}

init {
	atomic {
#ifdef NO_WINDOW
		done[W1] = 1;
#else
		run Window(W1);
#endif
#ifdef ONE_WINDOW
		done[W2] = 1;
#else
		run Window(W2);
#endif
		run Apply(A);
#ifdef RECREATE
		run Apply(B);
		nm[0] = NAMEN; ver[0] = 1; crun[0] = 1;
#ifdef CONTENT_DRIFT
		applied = 2;   /* an env-file's content changed after the last apply: C runs 1, the desired state reads 2 */
#endif
#ifdef START_FIRST
		alias[0] = 1; booted = 1;
#endif
		if :: healthy2 = 1 :: skip fi;
#else
		done[B] = 1;
#endif
		run LastApply()
	}
}

/* Liveness: every stale hold is released and its container comes back. */
#ifdef LIVENESS
#ifdef RECREATE
/* and C ends as one container, under its name, running */
ltl heal { <> [] (!hold[1] && !hold[2] && C_RUNS && NRUN == 1 && !stopping[0] && !stopping[1] && !stopping[2]) }
#else
ltl heal { <> [] (!hold[1] && !hold[2] && c_run && !c_stopping) }
#endif
#endif

#else /* CHANGED_HOLD */

/*
 * CHANGED_HOLD (the changed-hold configuration, issue 28): the step holds C
 * changed, not stopped (a read-only registry). C is served by containers of
 * service C, by slot: a name (C, or C.meshctl-held: the normal one set
 * aside), a spec (NORMAL, or CHANGED: the window's change, labelled with
 * the window's id, owner), run, a stop or start in flight, a restart policy
 * ("no" or the normal one, which the changed container has too). Two windows
 * (W1, W2) and an apply (A) run at once, and a killer may SIGKILL any of them
 * between any two of their steps (MAXK kills); once it is done and they have
 * ended, the last apply (F, the next cron run) runs, again while a hold
 * remains honoured. dockerd may restart once, and then starts every stopped
 * container whose policy is not "no". The changed container passes its gate
 * or fails it (chosen once, at the start: both are checked).
 *
 * The protocol, step by step (each "code:" line one lock, one state-file
 * write or one engine call):
 *   open: under the state lock: the stale release and the sweep, then the
 *     hold recorded (before anything is touched); the lock released;
 *     SetRestart(normal, no); StopThrough(normal); Rename(normal,
 *     C.meshctl-held); Create(changed, C, the normal policy, the window's
 *     label); Start(changed); the gate. Failed: Remove(changed),
 *     Rename(held, C), SetRestart(policy), Start(normal); the step does not
 *     run, the hold is dropped.
 *   step: Start of the step container (in flight when its sender dies), Wait.
 *   close: Remove(changed); Rename(held, C); SetRestart(policy);
 *     Start(normal) and its gate; under the state lock, the hold dropped.
 *   stale release (an apply's, a window's open), under the state lock, of a
 *     hold whose window's lock is free and whose step container does not
 *     run (window locks first, then the listing): removeDeadSteps; Remove of
 *     the changed container (by its label); Rename(held, C) (a name taken:
 *     the release fails, the hold stays); finishDeadStop (policy "no": a
 *     stop may be in flight, StopThrough waits for it); SetRestart, Start;
 *     holds.json written. A dead window whose step container runs is
 *     orphaned: honoured, both containers left as they are.
 *   sweep (apply, window open), under the state lock: C.meshctl-held is
 *     left alone while a hold is recorded; without one, a changed copy
 *     under C is removed (stopped first), the one aside removed beside any
 *     other container under C, else renamed back and brought back.
 *   apply's plan, here under the state lock: C held by a hold still
 *     honoured: held (never recreated, changed or not); else a changed
 *     container under C is drift (recreated to the normal spec), a missing
 *     C is created, a stopped one (or one left with policy "no") started.
 * Properties: never stuck changed (once everything has ended, the last
 * apply's first pass that finds no hold honoured leaves exactly one
 * container of C, under its name, running the normal spec, its policy
 * restored, and no hold a pass found stale stays); never two containers of
 * C run at once; the normal spec never serves while the step runs.
 *   BROKEN_RELEASE_KEEPS_CHANGED  the stale release does not remove the
 *                       changed container: its rename back finds C taken,
 *                       the release fails, the hold stays, C stays changed
 *   BROKEN_CLOSE_START_FIRST  the close starts the normal one (aside)
 *                       before it removes the changed one
 *   BROKEN_SWEEP_TAKES_HELD  the sweep puts C.meshctl-held back as a
 *                       recreate's leftover (what is under C removed, it
 *                       renamed back and started), whatever the holds say
 *   BROKEN_APPLY_REPAIRS_CHANGED  the plan recreates a changed C to the
 *                       normal spec though a hold honoured holds it (the
 *                       incident the contract calls (a), changed)
 *   BROKEN_OPEN_STARTS_BEFORE_RECORD  the open switches C to the changed
 *                       container before it records its hold
 *   BROKEN_OPEN_STOP_FIRST  the open stops the normal one before it sets its
 *                       policy to "no": a release takes a dead window's stop
 *                       in flight for none, and it lands after the start
 *   BROKEN_ORPHAN_STALE  a dead window's hold is stale whatever its step
 *                       container does: the release brings the normal one
 *                       back while an orphaned step still sweeps
 * Left out: a deferred change carried out at the close (the recreate
 * configuration's subject), the apply's claim (its engine work is under the
 * state lock here), a failed listing, lost answers, a crash of the changed
 * container (its policy restarts it, changed).
 */

#define W1 1
#define W2 2
#define A  3
#define F  4

#define NS 3
#define NONE 255
#define NAMEN 1   /* C */
#define HELDN 2   /* C.meshctl-held */
#define NORMAL 1
#define CHANGED 2

byte statelock;
byte modlock;
bool winlock[3];
bool hold[3];       /* holds.json: window w's changed hold */

byte nm[NS];
byte spec[NS];
byte owner[NS];     /* the window label of a changed container */
bool crun[NS];
bool stopping[NS];
bool starting[NS];
bool polno[NS];
bool changed_ok;    /* the changed container passes its gate */
bool restarted;     /* dockerd has restarted (once) */
bool step_run;
bool step_starting;
byte step_owner;
bool step_live_start;

bool dead[5];
bool done[5];
byte kills;
bool nokill;
bool unhealed;      /* ghost: the last apply left a hold it found stale */

#define NRUN (crun[0] + crun[1] + crun[2])
#define NORMAL_RUNS (crun[0] && spec[0] == 1 || crun[1] && spec[1] == 1 || crun[2] && spec[2] == 1)

inline lock_state(me) { atomic { statelock == 0 -> statelock = me } }
inline unlock_state(me) { statelock = 0 }

inline slot(name, k) {
	k = (nm[0] == name -> 0 : (nm[1] == name -> 1 : (nm[2] == name -> 2 : NONE)))
}
/* k becomes the slot of window w's changed container, NONE if none */
inline changed_of(w, k) {
	k = (nm[0] != 0 && spec[0] == CHANGED && owner[0] == w -> 0 :
	    (nm[1] != 0 && spec[1] == CHANGED && owner[1] == w -> 1 :
	    (nm[2] != 0 && spec[2] == CHANGED && owner[2] == w -> 2 : NONE)))
}
inline free_slot(k) {
	k = (nm[0] == 0 -> 0 : (nm[1] == 0 -> 1 : (nm[2] == 0 -> 2 : NONE)));
	assert(k != NONE)
}
/* code: engine.Remove, forced: a start in flight is carried out first */
inline remove_k(k) {
	atomic { nm[k] = 0; spec[k] = 0; owner[k] = 0; crun[k] = 0; stopping[k] = 0; starting[k] = 0; polno[k] = 0 }
}
/* code: engine.Start: carried out even if its sender dies */
inline start_k(k) {
	atomic { if :: nm[k] != 0 && !crun[k] -> starting[k] = 1 :: else fi };
	(!starting[k])
}
/* code: StopThrough: a start in flight first; a stop in flight goes on */
inline stop_k(k) {
	(!starting[k]);
	atomic { if :: nm[k] != 0 && crun[k] -> stopping[k] = 1 :: else fi };
	(!stopping[k])
}

/* code: Liveness.Classify: the window locks first, then one listing */
inline classify() {
	a1 = winlock[1];
	a2 = winlock[2];
	obs_step = step_run;
#ifdef BROKEN_ORPHAN_STALE
	s1 = h1 && !a1;
	s2 = h2 && !a2
#else
	s1 = h1 && !a1 && !obs_step;
	s2 = h2 && !a2 && !obs_step
#endif
}

/* code: releaseStale of the stale hold of window w (under the state lock) */
inline release_one(w) {
	atomic { assert(!(step_run && step_live_start)); step_starting = 0; step_run = 0 };  /* code: removeDeadSteps */
#ifndef BROKEN_RELEASE_KEEPS_CHANGED
	atomic { changed_of(w, k) };
	if :: k != NONE -> remove_k(k) :: else fi;            /* code: Remove(changed), by its label */
#endif
	atomic { slot(HELDN, k); slot(NAMEN, o) };
	if
	:: k != NONE && o != NONE                             /* code: Rename(held, C): the name is taken: the release fails, the hold stays */
	:: else ->
		if
		:: k != NONE -> atomic { nm[k] = NAMEN; o = k }   /* code: Rename(held, C) */
		:: else
		fi;
		if
		:: o != NONE && spec[o] == NORMAL ->
			if :: polno[o] -> stop_k(o) :: else fi;       /* code: finishDeadStop: a stop may be in flight */
			polno[o] = 0;                                 /* code: BringBack: SetRestart */
			start_k(o)                                    /* code: BringBack: Start */
		:: else
		fi;
		hold[w] = 0                                       /* code: lock.Write(holds.json) */
	fi;
	atomic { o = 0; k = 0 }
}

inline release_stale() {
	if :: s1 -> release_one(1) :: else fi;
	if :: s2 -> release_one(2) :: else fi
}

/* code: coord.putBackLeftHeld, the sweep of a C.meshctl-held that no hold
 * records, under the state lock: a changed copy under C goes (stopped,
 * removed); beside another container under C the one aside goes; else it
 * takes its name back and is brought back (SetRestart, Start). */
inline sweep() {
	atomic { slot(HELDN, k); slot(NAMEN, o) };
	if
#ifdef BROKEN_SWEEP_TAKES_HELD
	:: k != NONE ->                                       /* (a recreate's leftover, whatever the holds say) */
		if :: o != NONE -> remove_k(o) :: else fi;
#else
	:: k != NONE && !hold[1] && !hold[2] ->
		if :: o != NONE && spec[o] == CHANGED -> stop_k(o); remove_k(o); o = NONE :: else fi;  /* code: removeAside(changed) */
		if
		:: o != NONE -> stop_k(k); remove_k(k); k = NONE  /* code: removeAside(held) */
		:: else
		fi;
#endif
		if
		:: k != NONE ->
			atomic { nm[k] = NAMEN };                     /* code: Rename(held, C) */
			polno[k] = 0;                                 /* code: BringBack: SetRestart */
			start_k(k)                                    /* code: BringBack: Start */
		:: else
		fi
	:: else
	fi;
	atomic { o = 0; k = 0 }
}

inline forget() { h1 = 0; h2 = 0; a1 = 0; a2 = 0; s1 = 0; s2 = 0; obs_step = 0 }

/* code: create the normal C under its name and start it */
inline create_normal() {
	atomic { free_slot(n); nm[n] = NAMEN; spec[n] = NORMAL; polno[n] = 0 };  /* code: Create */
	start_k(n);                                           /* code: Start */
	n = 0
}

/* One apply: observe, release, sweep, plan and carry it out, under the
 * state lock. */
inline apply_pass(me) {
	lock_state(me);
	atomic { h1 = hold[1]; h2 = hold[2] };
	classify();
	release_stale();
	sweep();
	atomic { slot(NAMEN, o); held = (h1 && !s1) || (h2 && !s2) };
	if
#ifdef BROKEN_APPLY_REPAIRS_CHANGED
	:: o != NONE && spec[o] == CHANGED -> remove_k(o); create_normal()  /* code: Plan: drift, recreate */
#endif
	:: held                                               /* code: Plan: held (changed): untouched */
	:: else ->
		if
		:: o == NONE -> create_normal()                   /* code: Plan: create */
		:: o != NONE && spec[o] == CHANGED -> remove_k(o); create_normal()  /* code: Plan: drift: recreate */
		:: o != NONE && spec[o] == NORMAL && (polno[o] || !crun[o]) ->
			polno[o] = 0; start_k(o)                      /* code: Plan: stopped: start */
		:: else
		fi
	fi;
	if :: me == F -> unhealed = unhealed || hold[1] && s1 || hold[2] && s2 :: else fi;
	atomic { unlock_state(me); forget(); o = 0; held = 0 }
}

/* the open's switch: the normal one aside, the changed one under C */
inline switch_in(me) {
	atomic { slot(NAMEN, o) };
	if :: o == NONE || spec[o] != NORMAL -> goto drop :: else fi;  /* code: Inspect: not the normal one: the open fails */
#ifdef BROKEN_OPEN_STOP_FIRST
	stop_k(o);
#endif
	polno[o] = 1;                                         /* code: SetRestart(normal, no) */
#ifndef BROKEN_OPEN_STOP_FIRST
	stop_k(o);                                            /* code: StopThrough(normal) */
#endif
	atomic { assert(nm[o] == NAMEN && spec[o] == NORMAL); nm[o] = HELDN };  /* code: Rename(normal, C.meshctl-held) */
	atomic { free_slot(n); nm[n] = NAMEN; spec[n] = CHANGED; owner[n] = me; polno[n] = 0 };  /* code: Create(changed) */
	start_k(n);                                           /* code: Start(changed) */
	if
	:: !changed_ok ->                                     /* code: the gate failed: the normal one back */
		atomic { assert(nm[n] == NAMEN && owner[n] == me) }; remove_k(n);  /* code: Remove(changed) */
		atomic { assert(nm[o] == HELDN); nm[o] = NAMEN }; /* code: Rename(held, C) */
		polno[o] = 0;                                     /* code: SetRestart(policy) */
		start_k(o);                                       /* code: Start(normal) */
		goto drop
	:: else
	fi
}

proctype Window(byte me) {
	bool h1, h2, a1, a2, s1, s2, obs_step; byte o, n, k;
	{
		if
		:: atomic { modlock == 0 -> modlock = me }        /* code: Run: the module lock */
		:: atomic { modlock != 0 -> done[me] = 1 }; goto gone
		fi;
		winlock[me] = 1;                                  /* code: Run: the window's lock */
#ifdef BROKEN_OPEN_STARTS_BEFORE_RECORD
		switch_in(me);
#endif
		lock_state(me);                                   /* code: record, under the state lock */
		atomic { h1 = hold[1]; h2 = hold[2] };
		classify();
		if
		:: (h1 && !s1) || (h2 && !s2) -> atomic { unlock_state(me); forget() }; goto closed  /* busy */
		:: else
		fi;
		release_stale();
		sweep();
		hold[me] = 1;                                     /* code: lock.Write(holds.json): the changed hold */
		atomic { unlock_state(me); forget() };
#ifndef BROKEN_OPEN_STARTS_BEFORE_RECORD
		switch_in(me);
#endif
		atomic { step_starting = 1; step_owner = me };    /* code: runContainer: Start the step */
		(!step_starting);
		(!step_run);                                      /* code: Wait */
		if :: step_run -> goto closed :: else fi;         /* code: stepStopped: still running: keep the hold */
		/* the close */
#ifdef BROKEN_CLOSE_START_FIRST
		polno[o] = 0; start_k(o);                         /* the normal one started aside first */
#endif
		atomic { assert(nm[n] == NAMEN && owner[n] == me) }; remove_k(n);  /* code: Remove(changed) */
		atomic { assert(nm[o] == HELDN); nm[o] = NAMEN }; /* code: Rename(held, C) */
		polno[o] = 0;                                     /* code: SetRestart(policy) */
		start_k(o);                                       /* code: Start(normal), its gate */
drop:
		lock_state(me);                                   /* code: lockToClose */
		hold[me] = 0;                                     /* code: lock.Write(holds.json) */
		unlock_state(me);
closed:
		atomic { modlock = 0; winlock[me] = 0; done[me] = 1 }
	} unless { dead[me] };
	if
	:: dead[me] -> atomic {
			if :: statelock == me -> statelock = 0 :: else fi;
			if :: modlock == me -> modlock = 0 :: else fi;
			winlock[me] = 0; done[me] = 1;
			h1 = 0; h2 = 0; a1 = 0; a2 = 0; s1 = 0; s2 = 0; obs_step = 0; o = 0; n = 0; k = 0 }
	:: else
	fi;
gone:
	skip
}

proctype Apply(byte me) {
	bool h1, h2, a1, a2, s1, s2, obs_step, held; byte o, n, k;
	{
		apply_pass(me);
		done[me] = 1
	} unless { dead[me] };
	if
	:: dead[me] -> atomic {
			if :: statelock == me -> statelock = 0 :: else fi;
			done[me] = 1;
			h1 = 0; h2 = 0; a1 = 0; a2 = 0; s1 = 0; s2 = 0; obs_step = 0; held = 0; o = 0; n = 0; k = 0 }
	:: else
	fi
}

/* The next apply, once nothing is killed any more and the others have
 * ended; it runs again while a hold it found honoured (an orphaned step)
 * remains, once the step has exited. */
proctype LastApply() {
	bool h1, h2, a1, a2, s1, s2, obs_step, held; byte o, n, k;
	(nokill && done[W1] && done[W2] && done[A]);
	do
	:: apply_pass(F);
		/* one apply heals: no hold it found stale stays */
		assert(!unhealed);
		if
		:: hold[1] || hold[2] -> (!step_run)
		:: else -> break
		fi
	od;
	/* never stuck changed: exactly one container of C, under its name,
	 * running the normal spec, its policy restored */
	(!starting[0] && !starting[1] && !starting[2] && !stopping[0] && !stopping[1] && !stopping[2]);
	atomic { slot(NAMEN, o);
		assert(o != NONE && crun[o] && spec[o] == NORMAL && !polno[o] && (nm[0] != 0) + (nm[1] != 0) + (nm[2] != 0) == 1) };
	done[F] = 1
}

active proctype Engine() {
end:
	do
	:: atomic { stopping[0] -> crun[0] = 0; stopping[0] = 0 }
	:: atomic { stopping[1] -> crun[1] = 0; stopping[1] = 0 }
	:: atomic { stopping[2] -> crun[2] = 0; stopping[2] = 0 }
	:: atomic { starting[0] -> crun[0] = 1; starting[0] = 0 }
	:: atomic { starting[1] -> crun[1] = 1; starting[1] = 0 }
	:: atomic { starting[2] -> crun[2] = 1; starting[2] = 0 }
	:: atomic { step_run -> step_run = 0 }
	:: atomic { step_starting -> step_run = 1; step_starting = 0; step_live_start = winlock[step_owner] }
#ifndef NO_ENGINE_RESTART
	/* dockerd restarts (once): it starts every stopped container whose
	 * policy is not "no" */
	:: atomic { !restarted && !nokill -> restarted = 1;
		if :: nm[0] != 0 && !crun[0] && !stopping[0] && !polno[0] -> crun[0] = 1; starting[0] = 0 :: else fi;
		if :: nm[1] != 0 && !crun[1] && !stopping[1] && !polno[1] -> crun[1] = 1; starting[1] = 0 :: else fi;
		if :: nm[2] != 0 && !crun[2] && !stopping[2] && !polno[2] -> crun[2] = 1; starting[2] = 0 :: else fi }
#endif
	od
}

active proctype Killer() {
	do
	:: kills < MAXK ->
		if
		:: atomic { !done[W1] && !dead[W1] -> dead[W1] = 1 }
		:: atomic { !done[W2] && !dead[W2] -> dead[W2] = 1 }
		:: atomic { !done[A] && !dead[A] -> dead[A] = 1 }
		:: else -> skip
		fi;
		kills++
	:: break
	od;
	nokill = 1
}

/* Safety: never two containers of C run at once; the normal spec never
 * serves while the step runs. */
active proctype Monitor() {
end:
	do
	:: atomic { NRUN > 1 -> assert(NRUN <= 1) }
	:: atomic { step_run && NORMAL_RUNS -> assert(!(step_run && NORMAL_RUNS)) }
	od
}

init {
	atomic {
		run Window(W1);
		run Window(W2);
		run Apply(A);
		nm[0] = NAMEN; spec[0] = NORMAL; crun[0] = 1;
		if :: changed_ok = 1 :: skip fi;
		run LastApply()
	}
}

#endif /* CHANGED_HOLD */
