#!/usr/bin/env bash
# compose.sh: meshctl against Docker Compose (built from source at a pinned version by
# scripts/peers.sh) on the same N=40 services, and against the engine's own floor:
#   - a no-op apply vs a no-op `docker compose up -d` (target: at most 0.4x);
#   - 40 changed containers: meshctl recreating 40 vs Compose recreating the same 40 (target:
#     at most 1.0x), and vs `docker run -d` of 40 new containers in parallel, the engine's floor
#     (target: at most 1.1x); meshctl at --parallel 1 and 8 shows where parallelism helps and
#     where the engine, which starts about one container per 0.7 s whatever the parallelism,
#     does not let it.
#
# Run by scripts/bench (see apply.sh). MESHCTL_BENCH_CHANGE_RUNS (default 3) rounds of changes.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly N=40 MODULE=cpbench PROJECT=cpbench-compose
export LC_ALL=C
runs=${MESHCTL_BENCH_RUNS:-20}
rounds=${MESHCTL_BENCH_CHANGE_RUNS:-3}

bench_env compose
state=$work/state
mesh=$work/mesh.yaml
cfile=$work/compose.yaml

bench_meshctl
eval "$("$here/../peers.sh")"
[[ -x ${compose:-} ]] || die "no docker-compose from scripts/peers.sh"

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local rc=$?
	"$compose" -p "$PROJECT" -f "$cfile" down -t 1 >/dev/null 2>&1 || true
	docker ps -aq --filter "label=meshctl-bench-floor=1" | xargs -r docker rm -f >/dev/null || true
	bench_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# files V writes the mesh file and the compose file of the same N services, env BENCH_V=V.
files() {
	{
		echo "modules:"
		echo "  $MODULE:"
		echo "    containers:"
		for ((i = 1; i <= N; i++)); do
			printf '      c%02d:\n' "$i"
			echo "        image: meshtest/busybox:1"
			echo "        command: [sh, -c, \"trap 'exit 0' TERM; sleep 86400 & wait\"]"
			echo "        env: {BENCH: \"$i\", BENCH_V: \"$1\"}"
			echo "        network: none"
		done
	} >"$mesh"
	{
		echo "services:"
		for ((i = 1; i <= N; i++)); do
			printf '  c%02d:\n' "$i"
			echo "    image: meshtest/busybox:1"
			echo "    command: [sh, -c, \"trap 'exit 0' TERM; sleep 86400 & wait\"]"
			echo "    environment: {BENCH: \"$i\", BENCH_V: \"$1\"}"
			echo "    network_mode: none"
			echo "    pull_policy: never"
		done
	} >"$cfile"
}

mc=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST")
up=("$compose" -p "$PROJECT" -f "$cfile" up -d --quiet-pull)

files a
log "starting $N services with meshctl and $N with Compose"
"${mc[@]}" -q apply -f "$mesh" --parallel 8
"${up[@]}" >/dev/null 2>&1

# No-op: both have their 40 running and nothing to change.
: >"$work/apply.ms"
: >"$work/up.ms"
for ((i = 0; i < 2; i++)); do "${mc[@]}" -q apply -f "$mesh"; "${up[@]}" >/dev/null 2>&1; done
for ((i = 0; i < runs; i++)); do
	time_ms "${mc[@]}" -q apply -f "$mesh" >>"$work/apply.ms"
	time_ms "${up[@]}" >>"$work/up.ms" 2>/dev/null
done
echo "no-op at N=$N (a loop of $runs runs each, interleaved, medians)"
bench_row "no-op apply, N=$N" "$(median <"$work/apply.ms")" "compose up -d (no-op)" "$(median <"$work/up.ms")" ms 0.4

# 40 changed containers, in rounds: the env flips between a and b.
: >"$work/m8.ms"
: >"$work/m1.ms"
: >"$work/cup.ms"
: >"$work/run.ms"
v=a
floor_run() {
	local i
	for ((i = 1; i <= N; i++)); do echo "$i"; done |
		xargs -P 8 -I{} docker run -d --label meshctl-bench-floor=1 --network none \
			-e BENCH={} -e BENCH_V="$v" meshtest/busybox:1 sh -c "trap 'exit 0' TERM; sleep 86400 & wait" >/dev/null
}
for ((r = 0; r < rounds; r++)); do
	for p in 8 1; do
		[[ $v == a ]] && v=b || v=a
		files "$v"
		time_ms "${mc[@]}" -q apply -f "$mesh" --parallel "$p" >>"$work/m$p.ms"
	done
	# Compose's services last had another value: round r gives them "c$r", new each time.
	files "c$r"
	time_ms "${up[@]}" >>"$work/cup.ms" 2>/dev/null
	files "$v"
	time_ms floor_run >>"$work/run.ms"
	docker ps -aq --filter "label=meshctl-bench-floor=1" | xargs -r docker rm -f >/dev/null
done
m8=$(median <"$work/m8.ms")
echo "$N changed containers ($rounds rounds, medians)"
bench_row "recreate $N changed, --parallel 8" "$m8" "compose up -d (recreates $N)" "$(median <"$work/cup.ms")" ms 1.0
bench_row "recreate $N changed, --parallel 8" "$m8" "docker run -d x$N, 8 at once" "$(median <"$work/run.ms")" ms 1.1
bench_row "recreate $N changed, --parallel 1" "$(median <"$work/m1.ms")" "meshctl --parallel 8" "$m8" ms -
