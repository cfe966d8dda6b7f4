#!/usr/bin/env bash
# baseline.sh: this meshctl against an older build of itself, so a restructure can show it costs no
# speed. Two figures, each with the old and the new binary interleaved in one loop:
#   - a no-op `meshctl apply` at 10 running containers (target: new at most 1.1x old);
#   - a `meshctl window run` holding one container with a step that does nothing, --settle 0s
#     (target: new at most 1.1x old).
#
# The old binary is built from MESHCTL_BENCH_BASE (default 5c9303e: main before the protocol moved
# into pkg/coord) with `git archive`, so the checkout is not touched. Without git history (a tarball
# of the source), the script says so and exits 0.
#
# Each binary has its own state dir and module (rbold, rbnew), so neither sees the other's
# containers. Timing: MESHCTL_BENCH_BASELINE_RUNS runs of each (default 15) after two warm-up runs;
# medians. Run by scripts/bench, which sets MESHCTL_BENCH_BIN, MESHCTL_BENCH_WORK and DOCKER_HOST.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

export LC_ALL=C # EPOCHREALTIME and awk must agree on the decimal point
runs=${MESHCTL_BENCH_BASELINE_RUNS:-15}
base=${MESHCTL_BENCH_BASE:-5c9303e}

bench_env baseline
state=$work/state-new
old_state=$work/state-old

# cleanup removes both sides' containers; bench_cleanup removes the new side's and the work dir.
cleanup() {
	local rc=$? id
	if [[ -s $old_state/id.json ]]; then
		id=$(jq -r .id "$old_state/id.json")
		docker ps -aq --filter "label=io.meshctl.managed=$id" | xargs -r -n 16 docker rm -f >/dev/null || true
	fi
	rm -rf "$old_state"
	(exit "$rc")
	bench_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_meshctl
top=$(cd "$here/../.." && pwd)
if ! git -C "$top" rev-parse --verify -q "$base^{commit}" >/dev/null; then
	log "no commit $base in this checkout (MESHCTL_BENCH_BASE): the baseline comparison is skipped"
	exit 0
fi
log "building the baseline meshctl from $base"
mkdir -p "$work/old-src"
git -C "$top" archive "$base" | tar -x -C "$work/old-src"
release_build "$work/old-src" "$work/meshctl-old"
old=$work/meshctl-old

# mesh_file MODULE writes the module's mesh file: 10 idle containers and one step holding c01.
mesh_file() {
	{
		echo "modules:"
		echo "  $1:"
		echo "    containers:"
		for ((i = 1; i <= 10; i++)); do
			printf '      c%02d:\n' "$i"
			echo "        image: meshtest/busybox:1"
			echo "        entrypoint: [/bin/sh, -c]"
			echo "        command: [\"trap 'exit 0' TERM; while :; do sleep 1 & wait; done\"]"
			echo "        network: none"
		done
		echo "    steps:"
		echo "      noop:"
		echo "        while-stopped: [c01]"
		echo "        exec: [/bin/true]"
	} >"$work/$1.yaml"
}
mesh_file rbold
mesh_file rbnew

old_mc=("$old" --state-dir "$old_state" --docker-host "$DOCKER_HOST")
new_mc=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST")
"${old_mc[@]}" -q apply -f "$work/rbold.yaml"
"${new_mc[@]}" -q apply -f "$work/rbnew.yaml"

# side SIDE KIND runs one timed command: SIDE is old or new, KIND apply or window.
side() {
	local -n mc=${1}_mc
	local module=rb$1
	case $2 in
	apply) "${mc[@]}" -q apply -f "$work/$module.yaml" ;;
	window) "${mc[@]}" -q window run --settle 0s "$module" noop ;;
	esac
}

for kind in apply window; do
	for ((i = 0; i < 2; i++)); do
		side old "$kind"
		side new "$kind"
	done
	: >"$work/old-$kind.ms"
	: >"$work/new-$kind.ms"
	for ((i = 0; i < runs; i++)); do
		time_ms side old "$kind" >>"$work/old-$kind.ms"
		time_ms side new "$kind" >>"$work/new-$kind.ms"
	done
done

for module in rbold rbnew; do
	[[ $(docker inspect -f '{{.State.Running}}' "$module.c01") == true ]] ||
		die "$module.c01 is not running after the windows"
done

printf 'this meshctl against the one built from %s (%d runs each, interleaved, medians)\n' "$base" "$runs"
bench_row "no-op apply, 10 containers" "$(median <"$work/new-apply.ms")" \
	"the same, meshctl $base" "$(median <"$work/old-apply.ms")" ms 1.1
bench_row "window open + close (one container)" "$(median <"$work/new-window.ms")" \
	"the same, meshctl $base" "$(median <"$work/old-window.ms")" ms 1.1
