#!/usr/bin/env bash
# window.sh: what a maintenance window costs beyond the engine's own work.
# It times `meshctl window run` of a step that does nothing (exec: [/bin/true]) holding one
# running container, against `docker stop` + `docker start` of that same container: the stop and
# start the window must do anyway, with --settle 0s (the health gate's wait is the operator's
# choice, and docker start has none). The difference is meshctl's overhead: the state lock twice,
# the holds and history files, the restart-policy changes, the list and inspect calls.
#
# Run by scripts/bench, which sets MESHCTL_BENCH_BIN, MESHCTL_BENCH_WORK and DOCKER_HOST (the
# test engine). Standalone, it builds meshctl itself and uses $MESHCTL_TEST_DOCKER_HOST.
#
# Timing: a loop of MESHCTL_BENCH_WINDOW_RUNS runs (default 10) of each, interleaved, after
# two warm-up runs; medians. The container (module wnbench, network none) and the state dir are
# removed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly MODULE=wnbench
export LC_ALL=C # EPOCHREALTIME and awk must agree on the decimal point
runs=${MESHCTL_BENCH_WINDOW_RUNS:-10}

bench_env window
state=$work/state
mesh=$work/mesh.yaml
name=$MODULE.app

trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_meshctl

# The held container stops at once on SIGTERM, so that neither side waits out a stop timeout.
cat >"$mesh" <<EOF
modules:
  $MODULE:
    containers:
      app:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["trap 'exit 0' TERM; while :; do sleep 1 & wait; done"]
        network: none
    steps:
      noop:
        while-stopped: [app]
        exec: [/bin/true]
EOF

mc=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST")
"${mc[@]}" -q apply -f "$mesh"
[[ $(docker inspect -f '{{.State.Running}}' "$name") == true ]] || die "$name does not run after apply"

# --settle 0s: the close's health gate (by default, 3 s of running for a container without a
# healthcheck) is a wait the operator chooses, not meshctl's overhead, and docker start has none.
window() { "${mc[@]}" -q window run --settle 0s "$MODULE" noop; }
engine_only() { docker stop "$name" >/dev/null && docker start "$name" >/dev/null; }

# Each side must leave the container running, or the other side's timing means nothing.
check_running() {
	[[ $(docker inspect -f '{{.State.Running}}' "$name") == true ]] || die "$name is not running after $1"
}

for ((i = 0; i < 2; i++)); do
	window
	check_running "a window"
	engine_only
	check_running "docker stop + start"
done

: >"$work/window.ms"
: >"$work/engine.ms"
for ((i = 0; i < runs; i++)); do
	t0=$(now_ms)
	window
	t1=$(now_ms)
	check_running "a window"
	t2=$(now_ms)
	engine_only
	t3=$(now_ms)
	check_running "docker stop + start"
	awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }' >>"$work/window.ms"
	awk -v a="$t2" -v b="$t3" 'BEGIN { print b - a }' >>"$work/engine.ms"
done
window_ms=$(median <"$work/window.ms")
engine_ms=$(median <"$work/engine.ms")

# Every window closed, and closed ok.
results=$("${mc[@]}" -o json window list --history 1000 | jq -r '[.history[].result] | unique | join(",")')
[[ $results == ok ]] || die "window results: $results (want only ok)"

printf 'window run holding one container (exec: /bin/true) vs docker stop + docker start of it\n'
printf '(a loop of %d runs each, interleaved, medians)\n' "$runs"
bench_row "window open + close (one container)" "$window_ms" "docker stop + docker start" "$engine_ms" ms 1.1
