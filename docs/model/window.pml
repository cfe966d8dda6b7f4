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
 *   BROKEN_REMOVE_FAIL_OPEN  a stale release whose remove of the dead
 *                       window's step container fails (an engine error, or
 *                       an answer lost: unknown) goes on and brings C back
 *
 *   BROKEN_STOP_THEN_NO  the window's open stops C before it sets C's
 *                       restart policy to "no": the engine, restarted in
 *                       between (or C's own restart after a crash), starts C
 *                       again with its policy, and it runs mid-step
 *
 * The engine acts on the restart policy: a C that is not running, with a
 * policy other than "no" (the file's "always", the worst case), is started
 * again by the engine once (an engine restart, or its restart after a
 * crash). The window's open sets "no" before its stop so that nothing
 * revives a held container.
 */

#ifndef MAXK
#define MAXK 2
#endif

#ifndef NO_APPLY_START_IN_FLIGHT
#define APPLY_START_IN_FLIGHT
#endif

/* process numbers: lock owners */
#define W1 1
#define W2 2
#define A  3
#define F  4

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
byte revived;       /* the engine started C again by its restart policy (once) */
byte rmfails;       /* a stale release's remove of the step container failed (once) */
byte step_owner;    /* ghost: the window whose step container it is */
bool step_live_start; /* ghost: its start completed while that window lived */
bool c_starting;    /* APPLY_START_IN_FLIGHT: a start of a new C in flight */
bool step_starting; /* a start of it is in flight (it reads "created"); the
                     * engine finishes it even if the window dies */

/* the killer */
bool dead[5];
bool done[5];
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

/* code: holds.Liveness.Classify: every window's lock first, then one engine
 * listing (lifecycle.Observe). h1,h2 are the holds read; s1,s2 become whether
 * each is stale. obs_c, obs_step are the listing. */
inline classify() {
#ifdef BROKEN_LIST_FIRST
	atomic { obs_c = c_run; obs_step = step_run };
	a1 = winlock[1];
	a2 = winlock[2];
#else
	a1 = winlock[1];
	a2 = winlock[2];
	atomic { obs_c = c_run; obs_step = step_run };
#endif
	/* stateOf: alive → open; else step container runs → orphaned; else stale */
	s1 = h1 && !a1 && !obs_step;
	s2 = h2 && !a2 && !obs_step
}

/* code: lifecycle.Windows.Release: each stale hold's C brought back as the
 * close would (settle, Resume), then holds.json written without them. */
inline release_stale() {
	if
	:: s1 || s2 ->
#ifndef BROKEN_STEP_REMOVED_LATE
		/* code: removeDeadSteps, before anything comes back: a start of the
		 * step container that its dead window sent may still be under way;
		 * the engine does a container's start and remove one after the
		 * other, so once the remove returns the step neither runs nor can
		 * start; a remove that fails fails the release */
		if
		:: atomic {
			/* a step that started while its window lived is never one a
			 * release finds stale: it is in the listing, made after the
			 * window's lock was found free */
			assert(!(step_run && step_live_start));
			step_starting = 0; step_run = 0
		   }
		/* the engine fails the remove, or its answer is lost (unknown:
		 * the step may still start): the release fails, nothing is
		 * written, the holds stay (once) */
		:: atomic { rmfails == 0 -> rmfails = 1; relfail = 1 }
		fi;
#ifdef BROKEN_REMOVE_FAIL_OPEN
		relfail = 0;                       /* goes on as if it were gone */
#endif
#endif
		if
		:: relfail -> skip
		:: else ->
		/* code: settle: a C that reads running with policy "no" has a stop
		 * in flight from its dead window: Stop waits for it. */
#ifndef BROKEN_NO_SETTLE
		if
		:: obs_c && c_pol_no -> stop_c()   /* code: Inspect, then Stop */
		:: else
		fi;
#endif
		c_pol_no = 0;                      /* code: Resume: SetRestart */
		start_c();                         /* code: Resume: Start */
		obs_c = 1;                         /* back[C] = true */
		atomic {                           /* code: lock.Write(holds.json) (and history) */
			if :: s1 -> hold[1] = 0 :: else fi;
			if :: s2 -> hold[2] = 0 :: else fi
		}
		fi
	:: else
	fi
}

/* forget clears a process's copies of what it read, once it no longer
 * needs them: the model's state, not the protocol's. */
inline forget() { h1 = 0; h2 = 0; a1 = 0; a2 = 0; s1 = 0; s2 = 0; obs_c = 0; obs_step = 0 }

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
	release_stale();
	/* code: Plan: C held by a hold still honoured → held (untouched);
	 * else stopped → recreate (the host's rule), running → unchanged. */
	if
	:: relfail ->                          /* code: Release failed: the apply fails, nothing written */
		atomic { relfail = 0; unlock_state(me); forget() }
	:: !relfail && !((h1 && !s1) || (h2 && !s2)) && !obs_c ->
		/* code: executeClaimed: claims.Take (the claim's lock, then
		 * claims.json), the state lock released, execute: Recreate (the
		 * old C reads stopped; renamed aside; a new C created and started
		 * with the desired policy), the state lock again */
		claimlock = me;
		claim = 1;
		atomic { unlock_state(me); forget() };
#ifdef APPLY_START_IN_FLIGHT
		atomic { c_pol_no = 0; c_stopping = 0; c_starting = 1 };  /* Create, Start sent */
		(!c_starting);                     /* ... and done */
#else
		atomic { c_run = 1; c_pol_no = 0; c_stopping = 0 };
#endif
		lock_state(me);
		/* code: record: lock.Write(applied.json, last-apply.json) (no shared effect) */
		claim = 0;                         /* code: Held.Release: claims.json */
		claimlock = 0;                     /* ... and the claim's lock */
		unlock_state(me)
	:: !relfail && ((h1 && !s1) || (h2 && !s2) || obs_c) ->
		/* code: record: lock.Write(applied.json, last-apply.json) (no shared effect) */
		atomic { unlock_state(me); forget() }
	fi
}

/* The cleanup of a killed process: the kernel drops its flocks. */
inline die(me) {
	atomic {
		if :: statelock == me -> statelock = 0 :: else fi;
		if :: modlock == me -> modlock = 0 :: else fi;
		if :: claimlock == me -> claimlock = 0 :: else fi;
		if :: me == W1 || me == W2 -> winlock[me] = 0 :: else fi;
		done[me] = 1
	}
}

proctype Window(byte me) {
	bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, relfail;
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
		 * unlock, claims.Wait for its lock, record again */
		if
		:: claim && claimlock != 0 ->
			unlock_state(me);
			(claimlock == 0);
			goto record
		:: else
		fi;
#endif
		atomic { h1 = hold[1]; h2 = hold[2] };
		classify();
		/* a hold on this module still honoured: busy */
		if
		:: (h1 && !s1) || (h2 && !s2) -> atomic { unlock_state(me); forget() }; goto closed
		:: else
		fi;
		release_stale();
		if
		:: relfail -> atomic { relfail = 0; unlock_state(me); forget() }; goto closed  /* code: the open fails */
		:: else
		fi;
		/* code: Inspect C (its restart policy, for the hold) (no shared effect) */
		hold[me] = 1;                      /* code: lock.Write(holds.json): the hold, with its step container */
		unlock_state(me);
#ifndef BROKEN_STOP_THEN_NO
		c_pol_no = 1;                      /* code: open: SetRestart(no), restart policy first */
#endif
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
#ifdef BROKEN_STOP_THEN_NO
		c_pol_no = 1;                      /* SetRestart(no) after the stop */
#endif

		/* code: runStep → runContainer: Inspect/Remove a leftover, Create, Start, Wait */
		/* code: Create the step container (no shared effect) */
		atomic { step_starting = 1; step_owner = me }  /* code: Start it: the request is in the engine */
		(!step_starting);                  /* ... and returns once the step runs */
#ifndef BROKEN_HOLD_EARLY
		(!step_run);                       /* code: Wait: the step exits (or is killed at its timeout) */
		/* code: Remove the step container (no shared effect) */

		/* code: close → stepStopped: one listing; still running → keep the hold */
		if
		:: step_run -> goto closed
		:: else
		fi;
#endif
		/* code: close → bringBack, no lock held: List, then Resume */
		/* code: List (no shared effect) */
		c_pol_no = 0;                      /* code: SetRestart(policy) */
		start_c();                         /* code: Start */
		lock_state(me);                    /* code: lockToClose */
		/* code: re-read applied.json: no newer change (no shared effect) */
		hold[me] = 0;                      /* code: lock.Write(holds.json): the hold dropped */
		/* code: lock.Write(windows-history.json) (no shared effect) */
		unlock_state(me);
closed:
		atomic { modlock = 0; winlock[me] = 0; done[me] = 1 }
	} unless { dead[me] };
	if
	:: dead[me] -> atomic { die(me); forget() }
	:: else
	fi;
gone:
	skip
}

proctype Apply(byte me) {
	bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, relfail;
	{
		apply_pass(me);
		atomic { done[me] = 1 }
	} unless { dead[me] };
	if
	:: dead[me] -> atomic { die(me); forget() }
	:: else
	fi
}

/* The next apply, once nothing is killed any more and the others have
 * ended; like cron, it runs again while a hold remains, each time once the
 * engine has moved on (a step container exited). */
proctype LastApply() {
	bool h1, h2, a1, a2, s1, s2, obs_c, obs_step, relfail;
	(nokill && done[W1] && done[W2] && done[A]);
	apply_pass(F);
	do
	:: hold[1] || hold[2] -> (!step_run); apply_pass(F)
	:: else -> break
	od;
	done[F] = 1
}

active proctype Engine() {
end:
	do
	:: atomic { c_stopping -> c_run = 0; c_stopping = 0 }  /* a stop completes */
	:: atomic { step_run -> step_run = 0 }                  /* the step ends, or is killed */
	:: atomic { crashes == 0 && !nokill && c_run && !c_stopping -> c_run = 0; crashes = 1 } /* C exits */
	:: atomic { revived == 0 && !c_run && !c_stopping && !c_pol_no -> c_run = 1; revived = 1 } /* the engine starts C by its policy */
#ifdef APPLY_START_IN_FLIGHT
	:: atomic { c_starting -> c_run = 1; c_starting = 0 }  /* a start of C completes */
#endif
	:: atomic { step_starting -> step_run = 1; step_starting = 0;  /* a start completes */
	            step_live_start = winlock[step_owner] }
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

/* Safety: no held container is started or recreated while its step runs. */
active proctype Monitor() {
end:
	atomic { (step_run && c_run) -> assert(false) }
}

init {
	atomic {
		run Window(W1);
		run Window(W2);
		run Apply(A);
		run LastApply()
	}
}

/* Liveness: every stale hold is released and its container comes back. */
#ifdef LIVENESS
ltl heal { <> [] (!hold[1] && !hold[2] && c_run && !c_stopping) }
#endif
