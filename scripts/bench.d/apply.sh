#!/usr/bin/env bash
# apply.sh: a no-op `meshctl apply` at N running containers (MESHCTL_BENCH_SIZES, default
# "10 40 200 1000"), each figure against its peers in the same run:
#   - `docker ps -a` on the same engine (target: at most 0.9x);
#   - the raw API floor: one curl process making a ping and one filtered list over the socket,
#     the two requests a no-op apply makes (target: at most 1.3x);
#   - the engine requests the apply made (target: 2 at every N);
#   - at the largest N, the apply's peak RSS (target: at most 40 MiB).
#
# Run by scripts/bench, which sets MESHCTL_BENCH_BIN, MESHCTL_BENCH_WORK, MESHCTL_BENCH_ROWS and
# DOCKER_HOST (the test engine). Standalone, it builds meshctl itself. Starting 1000 containers
# takes the engine about 0.7 s each: the full run takes a quarter of an hour.
# Timing: a loop of MESHCTL_BENCH_RUNS runs (default 20) of each command, interleaved, medians,
# once the machine is idle after the converge (lib.sh wait_idle).
# MESHCTL_BENCH_BASE_BIN, when set, is another meshctl (an older build) timed in the same loop,
# on a copy of the state directory: the same containers, its own decode cache.
# The containers (module MESHCTL_BENCH_MODULE, default apbench, network none) and the state dir
# are removed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly MODULE=${MESHCTL_BENCH_MODULE:-apbench}
export LC_ALL=C # EPOCHREALTIME and awk must agree on the decimal point
runs=${MESHCTL_BENCH_RUNS:-20}
read -r -a sizes <<<"${MESHCTL_BENCH_SIZES:-10 40 200 1000}"

bench_env apply
state=$work/state
mesh=$work/mesh.yaml

trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_meshctl
command -v curl >/dev/null || die "curl is needed for the API floor"

# mesh_file N writes a mesh file of N containers.
mesh_file() {
	{
		echo "modules:"
		echo "  $MODULE:"
		echo "    containers:"
		for ((i = 1; i <= $1; i++)); do
			printf '      c%04d:\n' "$i"
			echo "        image: meshtest/busybox:1"
			echo "        command: [sh, -c, \"trap 'exit 0' TERM; sleep 86400 & wait\"]"
			echo "        env: {BENCH: \"$i\"}"
			echo "        network: none"
		done
	} >"$mesh"
}

apply_cmd=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST" apply -f "$mesh")
base=${MESHCTL_BENCH_BASE_BIN:-}
base_cmd=("$base" --state-dir "$work/base-state" --docker-host "$DOCKER_HOST" apply -f "$mesh")
# The side-by-side table printed at the end: one line per N.
side=()
sock=${DOCKER_HOST#unix://}

for n in "${sizes[@]}"; do
	mesh_file "$n"
	log "converging $n containers"
	"${apply_cmd[@]}" -q --prune --parallel 8
	report=$("${apply_cmd[@]}" -o json)
	changed=$(jq -r .changed <<<"$report")
	calls=$(jq -r .engine_calls <<<"$report")
	unchanged=$(jq '[.containers[] | select(.action == "unchanged")] | length' <<<"$report")
	[[ $changed == false && $unchanged == "$n" ]] ||
		die "the apply at $n is not a no-op: changed=$changed, $unchanged of $n unchanged"

	id=$(jq -r .id "$state/id.json")
	filters=$(jq -rn --arg l "io.meshctl.managed=$id" '{label: [$l]} | @uri')
	floor_cmd=(curl -s --unix-socket "$sock" -o /dev/null -o /dev/null
		"http://engine/_ping" "http://engine/containers/json?all=1&filters=$filters")

	if [[ -n $base ]]; then
		rm -rf "$work/base-state"
		cp -a "$state" "$work/base-state"
		[[ $("${base_cmd[@]}" -o json | jq -r .changed) == false ]] ||
			die "the apply of MESHCTL_BENCH_BASE_BIN at $n is not a no-op"
	fi
	wait_idle
	: >"$work/apply.ms"
	: >"$work/base.ms"
	: >"$work/ps.ms"
	: >"$work/floor.ms"
	for ((i = 0; i < 3; i++)); do
		"${apply_cmd[@]}" -q
		if [[ -n $base ]]; then "${base_cmd[@]}" -q; fi
		docker ps -a >/dev/null
		"${floor_cmd[@]}"
	done
	for ((i = 0; i < runs; i++)); do
		time_ms "${apply_cmd[@]}" -q >>"$work/apply.ms"
		if [[ -n $base ]]; then time_ms "${base_cmd[@]}" -q >>"$work/base.ms"; fi
		time_ms docker ps -a >>"$work/ps.ms"
		time_ms "${floor_cmd[@]}" >>"$work/floor.ms"
	done
	apply_ms=$(median <"$work/apply.ms")
	base_ms=-
	if [[ -n $base ]]; then base_ms=$(median <"$work/base.ms"); fi
	ps_ms=$(median <"$work/ps.ms")
	floor_ms=$(median <"$work/floor.ms")
	echo "no-op apply at N=$n (a loop of $runs runs each, interleaved, medians)"
	bench_row "no-op apply, N=$n" "$apply_ms" "docker ps -a" "$ps_ms" ms 0.9
	bench_row "no-op apply, N=$n" "$apply_ms" "API floor (curl: ping + list)" "$floor_ms" ms 1.3
	side+=("$(awk -v n="$n" -v a="$apply_ms" -v b="$base_ms" -v f="$floor_ms" -v p="$ps_ms" -v l="$(cut -d' ' -f1 /proc/loadavg)" \
		'BEGIN { printf "%6d %10.1f %10s %10.1f %7.2fx %12.1f %7.2fx %6s", n, a, b, f, a / f, p, a / p, l }')")
	bench_row "engine requests, N=$n" "$calls" "the floor's requests" 2 req 1.0
done

echo "no-op apply side by side (ms, medians; targets: <= 1.3x the floor, <= 0.9x docker ps -a)"
printf '%6s %10s %10s %10s %8s %12s %8s %6s\n' N apply base floor ratio "docker ps -a" ratio load
printf '%s\n' "${side[@]}"

# Peak RSS at the largest N: GNU time's maximum resident set size, in KiB.
if [[ -x /usr/bin/time ]]; then
	n=${sizes[-1]}
	rss=$(/usr/bin/time -f %M "${apply_cmd[@]}" -q 2>&1 >/dev/null | tail -1)
	bench_row "peak RSS of apply, N=$n" "$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')" "the target, 40 MiB" 40 MiB 1.0
else
	log "no /usr/bin/time (Debian package time): peak RSS not measured"
fi
