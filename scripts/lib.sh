# shellcheck shell=bash
# lib.sh: helpers shared by engine.sh, images.sh and test. Source it; do not run it.
#
# It resolves where the private test engine lives:
#   MESHCTL_ENGINE_DIR        engine home (socket, data root, exec root, pid files, logs); default
#                             /tmp/meshctl-engine-XXXXXXXX, one per checkout (XXXXXXXX: a hash of
#                             its path), so that scripts/engine.sh in one checkout never reaches
#                             the engine of another
#   MESHCTL_TEST_DOCKER_HOST  the engine the tests use; default unix://$MESHCTL_ENGINE_DIR/docker.sock
# scripts/test, demo and bench use an engine that already answers there; otherwise each run starts
# one in a home of its own (run_engine_home), which it stops and removes when it ends.

# Keep the engine home short: unix socket paths are limited to 107 bytes, and containerd puts
# "$ENGINE_DIR/exec/containerd/containerd.sock.ttrpc" (42 bytes more) under it.
readonly ENGINE_DIR_MAX=60

# set_engine_dir DIR makes DIR the engine home of this script and of the scripts it runs.
set_engine_dir() {
	ENGINE_DIR=$1
	case $ENGINE_DIR in
	/*) ;;
	*) ENGINE_DIR=$PWD/$ENGINE_DIR ;;
	esac
	while [[ $ENGINE_DIR == */ && $ENGINE_DIR != / ]]; do ENGINE_DIR=${ENGINE_DIR%/}; done
	ENGINE_SOCK=$ENGINE_DIR/docker.sock
	ENGINE_PRIVATE_HOST=unix://$ENGINE_SOCK
	ENGINE_HOST=${MESHCTL_TEST_DOCKER_HOST:-$ENGINE_PRIVATE_HOST}
	export MESHCTL_ENGINE_DIR=$ENGINE_DIR
}

# checkout_engine_dir prints the default engine home of this checkout.
checkout_engine_dir() {
	local top sum
	top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
	sum=$(printf '%s' "$top" | cksum)
	printf '/tmp/meshctl-engine-%08x\n' "${sum%% *}"
}

# run_engine_home gives this run an engine home of its own, unless the engine to use was named
# (MESHCTL_TEST_DOCKER_HOST or MESHCTL_ENGINE_DIR) or one already answers in the checkout's home.
# It sets own_home to the new home (empty when none was made); the caller removes it at the end
# (remove_engine_home), after stopping the engine.
run_engine_home() {
	own_home=''
	if [[ -n ${MESHCTL_TEST_DOCKER_HOST:-} || -n $engine_dir_given ]] || engine_answers; then
		return 0
	fi
	own_home=$(mktemp -d /tmp/mse-XXXXXX)
	set_engine_dir "$own_home"
}

# remove_engine_home removes a home run_engine_home made, once nothing of its engine runs.
remove_engine_home() {
	[[ -n ${own_home:-} && $own_home == /tmp/mse-* ]] || return 0
	if [[ -e $own_home/dockerd.pid || -e $own_home/containerd.pid ]]; then
		log "engine home $own_home still has a running engine; left in place"
		return 0
	fi
	rm -rf "$own_home" 2>/dev/null || log "could not remove $own_home"
}

engine_dir_given=${MESHCTL_ENGINE_DIR:-}
set_engine_dir "${MESHCTL_ENGINE_DIR:-$(checkout_engine_dir)}"

# dockerd, containerd and runc live in /usr/sbin and /sbin, which a non-login PATH may lack.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin ;; esac
case ":$PATH:" in *:/sbin:*) ;; *) PATH=$PATH:/sbin ;; esac
export PATH

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# is_ci is true when running under CI (CI=true, as GitHub, GitLab and most runners set it).
is_ci() { [[ ${CI:-} == true || ${CI:-} == 1 ]]; }

# check_engine_paths refuses an engine home that would break socket paths or dockerd flags, and
# the host's own engine: tests create and delete containers and must never touch it.
check_engine_paths() {
	[[ $ENGINE_DIR =~ ^/[A-Za-z0-9._/-]+$ ]] ||
		die "MESHCTL_ENGINE_DIR=$ENGINE_DIR: use only letters, digits and ._/- in it"
	((${#ENGINE_DIR} <= ENGINE_DIR_MAX)) ||
		die "MESHCTL_ENGINE_DIR=$ENGINE_DIR is ${#ENGINE_DIR} bytes; keep it to $ENGINE_DIR_MAX at most (unix socket paths are limited to 107)"
	case $ENGINE_HOST in
	unix:///var/run/docker.sock | unix:///run/docker.sock)
		die "MESHCTL_TEST_DOCKER_HOST=$ENGINE_HOST is the host's own engine; tests must use a private one (unset it)"
		;;
	esac
}

# dk runs the docker CLI against the test engine only: never DOCKER_HOST, never a context, and
# with a CLI config of its own so a user's credential helpers or contexts cannot interfere.
dk() {
	env -u DOCKER_CONTEXT DOCKER_CONFIG="$ENGINE_DIR/cli" docker -H "$ENGINE_HOST" "$@"
}

# engine_answers is true when the test engine replies to an API call within 10 seconds.
engine_answers() {
	timeout 10 env -u DOCKER_CONTEXT DOCKER_CONFIG="$ENGINE_DIR/cli" \
		docker -H "$ENGINE_HOST" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# bench_env NAME: the engine and scratch directory of a scripts/bench.d script. It exports
# DOCKER_HOST and DOCKER_CONFIG for the test engine (never the host's own), and sets work (a
# scratch directory: MESHCTL_BENCH_WORK, else a new one) and own_work (1 when made here, for the
# script to remove).
bench_env() {
	export DOCKER_HOST=${DOCKER_HOST:-$ENGINE_HOST}
	export DOCKER_CONFIG=${DOCKER_CONFIG:-$ENGINE_DIR/cli}
	unset DOCKER_CONTEXT
	case $DOCKER_HOST in
	unix:///var/run/docker.sock | unix:///run/docker.sock)
		die "DOCKER_HOST=$DOCKER_HOST is the host's own engine; benchmark the private test engine"
		;;
	esac
	engine_answers || die "no engine answers at $DOCKER_HOST; run scripts/engine.sh start"
	# shellcheck disable=SC2034 # used by the bench.d scripts
	own_work=0
	work=${MESHCTL_BENCH_WORK:-}
	if [[ -z $work ]]; then
		work=$(mktemp -d "${TMPDIR:-/tmp}/meshctl-bench-$1.XXXXXX")
		# shellcheck disable=SC2034
		own_work=1
	fi
}

# bench_cleanup is a bench.d script's EXIT trap: it removes the containers of
# the run's state dir ($state; they carry its identity), the state dir, and
# the scratch directory if the script made it.
bench_cleanup() {
	local rc=$? id=
	# shellcheck disable=SC2154 # $state is the bench.d script's
	if [[ -s $state/id.json ]]; then
		id=$(jq -r .id "$state/id.json")
		# 16 at a time: one `docker rm -f` of 1000 containers removes them all at once, which
		# deadlocked Debian's dockerd 20.10.24 (its network controller's lock) on this machine.
		docker ps -aq --filter "label=io.meshctl.managed=$id" | xargs -r -n 16 docker rm -f >/dev/null || true
	fi
	rm -rf "$state"
	if ((own_work)); then rm -rf "$work"; fi
	exit "$rc"
}

# release_build DIR OUT builds DIR's meshctl into OUT as .goreleaser.yaml builds the released one
# (static, no cgo, trimmed paths, no symbol table, no etcd client: tag noetcd), and meshctl-etcd,
# the same with the client, beside it, which OUT runs for an etcd ledger: a benchmark times the
# binaries operators run. A cgo build with symbols starts about 3 ms slower, and so does one with
# the etcd client (docs/performance.md). A checkout older than the tag builds meshctl with the client.
release_build() {
	local flags=(-trimpath -ldflags "-s -w")
	(cd "$1" && CGO_ENABLED=0 go build "${flags[@]}" -tags noetcd -o "$2" ./cmd/meshctl &&
		CGO_ENABLED=0 go build "${flags[@]}" -o "$(dirname "$2")/meshctl-etcd" ./cmd/meshctl)
}

# bench_meshctl sets meshctl to $MESHCTL_BENCH_BIN, else builds one in $work.
bench_meshctl() {
	meshctl=${MESHCTL_BENCH_BIN:-}
	if [[ -z $meshctl ]]; then
		log "building meshctl"
		release_build "$(dirname "${BASH_SOURCE[0]}")/.." "$work/meshctl"
		meshctl=$work/meshctl
	fi
}

# median prints the median of the numbers on stdin, one a line.
median() {
	sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# now_ms prints the wall clock in milliseconds, with fractions, without a fork (bash 5).
now_ms() {
	local t=${EPOCHREALTIME/[.,]/}
	echo "$((t / 1000)).$(printf '%03d' $((t % 1000)))"
}

# bench_row WHAT MINE PEER THEIRS UNIT TARGET records one row of scripts/bench's table: what was
# measured, meshctl's figure, the peer it is compared with and the peer's figure in the same run
# and unit, and the target for the ratio MINE/THEIRS ("1.1" means at most 1.1x; "-" for a row
# that only informs; ">=N" for a target on MINE itself, at least N). It prints the
# row, and appends it to $MESHCTL_BENCH_ROWS (tab-separated) when scripts/bench collects them.
bench_row() {
	local what=$1 mine=$2 peer=$3 theirs=$4 unit=$5 target=$6 ratio verdict shown
	ratio=$(awk -v a="$mine" -v b="$theirs" 'BEGIN { if (b + 0 > 0) printf "%.2f", a / b; else print "-" }')
	if [[ $target == ">="* ]]; then
		verdict=$(awk -v m="$mine" -v t="${target#>=}" 'BEGIN { print (m + 0 >= t + 0 ? "met" : "MISSED") }')
		shown="meshctl >= ${target#>=} $unit"
		ratio=- # the target is on the figure, not on a ratio
	else
		verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN { if (r == "-" || t == "-") print "-"; else print (r + 0 <= t + 0 ? "met" : "MISSED") }')
		shown="<= ${target}x"
	fi
	printf '  %-40s %10s %-4s  %-30s %10s  %6sx  (target %s) %s\n' \
		"$what" "$mine" "$unit" "$peer" "$theirs" "$ratio" "$shown" "$verdict"
	if [[ -n ${MESHCTL_BENCH_ROWS:-} ]]; then
		printf '%s\t%s %s\t%s\t%s %s\t%sx\t%s\t%s\n' \
			"$what" "$mine" "$unit" "$peer" "$theirs" "$unit" "$ratio" "$shown" "$verdict" >>"$MESHCTL_BENCH_ROWS"
	fi
}

# wait_idle waits (at most MESHCTL_BENCH_IDLE_WAIT seconds, default 120) until the machine's CPUs
# were at least 85% idle in each of three seconds in a row, as /proc/stat counts them: the engine's
# work of a converge (starting or removing hundreds of containers) goes on for a minute after the
# last request, in bursts, and a figure taken meanwhile times the engine's backlog, not the
# command. One idle second (the rule before) came between two bursts at 1000 containers, with a
# load average of 15.
wait_idle() {
	local deadline=$((SECONDS + ${MESHCTL_BENCH_IDLE_WAIT:-120})) a b quiet=0
	read -r -a a < <(head -1 /proc/stat)
	while ((SECONDS < deadline)); do
		sleep 1
		read -r -a b < <(head -1 /proc/stat)
		# Fields 1..7: user nice system idle iowait irq softirq.
		local total=0 i
		for ((i = 1; i <= 7; i++)); do total=$((total + b[i] - a[i])); done
		if ((total > 0 && (b[4] - a[4]) * 100 >= total * 85)); then
			if ((++quiet == 3)); then return 0; fi
		else
			quiet=0
		fi
		a=("${b[@]}")
	done
	log "the machine is still busy after ${MESHCTL_BENCH_IDLE_WAIT:-120} s: timing anyway (see the load column)"
}

# time_ms CMD... runs CMD once (its output discarded) and prints its wall time in milliseconds.
time_ms() {
	local t0 t1
	t0=$(now_ms)
	"$@" >/dev/null
	t1=$(now_ms)
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f\n", b - a }'
}
