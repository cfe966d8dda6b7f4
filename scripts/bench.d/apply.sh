#!/usr/bin/env bash
# apply.sh: the wall time of a no-op `meshctl apply` of 40 running containers against
# `docker ps -a` on the same engine, and the engine requests the apply makes.
# Target (issue 3): at most 1.5x docker ps, at most 2 engine calls.
#
# Run by scripts/bench, which sets MESHCTL_BENCH_BIN, MESHCTL_BENCH_WORK and DOCKER_HOST (the
# test engine). Standalone, it builds meshctl itself and uses $MESHCTL_TEST_DOCKER_HOST.
#
# Timing: hyperfine when it is installed (as root, it installs the Debian package if missing),
# else (or with MESHCTL_BENCH_TOOL=loop) a loop of MESHCTL_BENCH_RUNS runs (default 20) of each,
# interleaved; medians either way.
# The containers (module apbench, network none) and the state dir are removed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly N_CONTAINERS=40 MODULE=apbench
export LC_ALL=C # EPOCHREALTIME and awk must agree on the decimal point
runs=${MESHCTL_BENCH_RUNS:-20}

bench_env apply
state=$work/state
mesh=$work/mesh.yaml

trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_meshctl

{
	echo "modules:"
	echo "  $MODULE:"
	echo "    containers:"
	for ((i = 1; i <= N_CONTAINERS; i++)); do
		printf '      c%02d:\n' "$i"
		echo "        image: meshtest/busybox:1"
		echo "        command: [sh, -c, \"trap 'exit 0' TERM; sleep 86400 & wait\"]"
		echo "        env: {BENCH: \"$i\"}"
		echo "        network: none"
	done
} >"$mesh"

apply_cmd=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST" apply -f "$mesh")

log "creating $N_CONTAINERS containers"
"${apply_cmd[@]}" -q --parallel 8
report=$("${apply_cmd[@]}" -o json)
changed=$(jq -r .changed <<<"$report")
calls=$(jq -r .engine_calls <<<"$report")
unchanged=$(jq '[.containers[] | select(.action == "unchanged")] | length' <<<"$report")
[[ $changed == false && $unchanged == "$N_CONTAINERS" ]] ||
	die "the second apply is not a no-op: changed=$changed, $unchanged of $N_CONTAINERS unchanged"

tool=${MESHCTL_BENCH_TOOL:-hyperfine}
if [[ $tool == hyperfine ]] && ! command -v hyperfine >/dev/null && ((EUID == 0)); then
	log "installing hyperfine"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q hyperfine >/dev/null 2>&1 ||
		log "cannot install hyperfine; timing with a loop"
fi

# median prints the median of the numbers on stdin, one a line.
median() {
	sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

apply_q=$(printf '%q ' "${apply_cmd[@]}")
ps_cmd=(docker ps -a)
if [[ $tool == hyperfine ]] && command -v hyperfine >/dev/null; then
	# -N: no shell in between, so neither side pays one.
	hyperfine -N --warmup 3 --runs "$runs" --style none --export-json "$work/hyperfine.json" \
		-n "meshctl apply (no-op)" "$apply_q" -n "docker ps -a" "${ps_cmd[*]}" >/dev/null
	apply_ms=$(jq '.results[0].median * 1000' "$work/hyperfine.json")
	ps_ms=$(jq '.results[1].median * 1000' "$work/hyperfine.json")
else
	tool="a loop of $runs runs"
	: >"$work/apply.ms"
	: >"$work/ps.ms"
	for ((i = 0; i < 3; i++)); do
		"${apply_cmd[@]}" -q
		"${ps_cmd[@]}" >/dev/null
	done
	# EPOCHREALTIME (bash 5) reads the clock without a fork, which would be timed too.
	for ((i = 0; i < runs; i++)); do
		t0=$EPOCHREALTIME
		"${apply_cmd[@]}" -q
		t1=$EPOCHREALTIME
		"${ps_cmd[@]}" >/dev/null
		t2=$EPOCHREALTIME
		echo "$t0 $t1" >>"$work/apply.ms"
		echo "$t1 $t2" >>"$work/ps.ms"
	done
	for f in apply ps; do
		awk '{ print ($2 - $1) * 1000 }' "$work/$f.ms" >"$work/$f.d"
		mv "$work/$f.d" "$work/$f.ms"
	done
	apply_ms=$(median <"$work/apply.ms")
	ps_ms=$(median <"$work/ps.ms")
fi

ratio=$(awk -v a="$apply_ms" -v p="$ps_ms" 'BEGIN { printf "%.2f", a / p }')
verdict=met
awk -v r="$ratio" -v c="$calls" 'BEGIN { exit !(r <= 1.5 && c <= 2) }' || verdict=missed
printf 'no-op apply of %d running containers vs docker ps -a (%s, medians)\n' "$N_CONTAINERS" "$tool"
printf '  meshctl apply   %8.1f ms\n' "$apply_ms"
printf '  docker ps -a    %8.1f ms\n' "$ps_ms"
printf '  ratio           %8s x   (target <= 1.5)\n' "$ratio"
printf '  engine_calls    %8s     (target <= 2)\n' "$calls"
printf '  target          %8s\n' "$verdict"
