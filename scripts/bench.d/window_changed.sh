#!/usr/bin/env bash
# window_changed.sh: what a registry's clients see through a maintenance window.
# The store is the real registry (meshtest/registry:1) on the host network at 127.0.0.1:5091,
# its blobs in the volume wcbench-data, one image pushed to it. A client on the host fetches that
# image's manifest every 200 ms (curl, each bounded to 1 s, never retried), from `window run`'s
# start to its exit. Two figures:
#   1. The share of fetches that succeed through a window whose step holds the registry
#      while-changed (read-only), beside the same step holding it while-stopped. Target: at
#      least 95% for while-changed.
#   2. Each switch of the while-changed window (the open's and the close's): from the stop
#      request to the first fetch that succeeds after it, against `docker stop` + `docker start`
#      of the same registry, timed the same way. Target: at most 1.2x.
#
# The stop request, timed from outside: the engine's events. Each switch begins with a stop of
# a container (the normal one at the open, the changed copy at the close), and the engine logs a
# "kill" event as it sends the stop signal. That event's time (docker events --since/--until,
# TimeNano) is the switch's start; `docker stop` makes the same event. The client's clock is the
# host's, as is the engine's: they run on one machine.
#
# Both windows run with --settle 0s: the close's health gate is the operator's choice, and
# docker start has none. The step is exec: [sleep, STEP].
#
# Run by scripts/bench (see window.sh). Knobs: MESHCTL_BENCH_WC_STEP (the step's length in
# seconds, default 60), MESHCTL_BENCH_WC_RUNS (runs of each mode, interleaved, default 3).
# The containers (module wcbench), the volume, the image and the state dir are removed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly MODULE=wcbench VOLUME=wcbench-data ADDR=127.0.0.1:5091
readonly IMAGE=$ADDR/wcbench/app:1
export LC_ALL=C # EPOCHREALTIME and awk must agree on the decimal point
step=${MESHCTL_BENCH_WC_STEP:-60}
runs=${MESHCTL_BENCH_WC_RUNS:-3}

bench_env window_changed
state=$work/state
mesh=$work/mesh.yaml
name=$MODULE.registry
client=

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local rc=$?
	if [[ -n $client ]]; then kill "$client" 2>/dev/null || true; fi
	if [[ -s $state/id.json ]]; then
		docker ps -aq --filter "label=io.meshctl.managed=$(jq -r .id "$state/id.json")" |
			xargs -r docker rm -f >/dev/null || true
	fi
	docker image rm -f "$IMAGE" >/dev/null 2>&1 || true
	docker volume rm -f "$VOLUME" >/dev/null 2>&1 || true
	bench_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bench_meshctl

cat >"$mesh" <<EOF
modules:
  $MODULE:
    containers:
      registry:
        image: meshtest/registry:1
        entrypoint: [/bin/registry]
        command: [serve, /etc/docker/registry/config.yml]
        env: {REGISTRY_HTTP_ADDR: "$ADDR"}
        volumes: ["$VOLUME:/var/lib/registry"]
        network: host
    steps:
      changed:
        while-changed:
          registry:
            env: {REGISTRY_STORAGE_MAINTENANCE_READONLY: '{"enabled": true}'}
        exec: [sleep, "$step"]
      stopped:
        while-stopped: [registry]
        exec: [sleep, "$step"]
EOF

mc=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST")
url=http://$ADDR/v2/wcbench/app/manifests/1
accept='Accept: application/vnd.docker.distribution.manifest.v2+json'
fetch() { curl -fsS -m 1 -o /dev/null -H "$accept" "$url" 2>/dev/null; }
wait_fetch() {
	local i
	for ((i = 0; i < 300; i++)); do
		if fetch; then return 0; fi
		sleep 0.1
	done
	die "no manifest at $url after 30 s"
}

"${mc[@]}" -q apply -f "$mesh"
id=$(jq -r .id "$state/id.json")
for ((i = 0; i < 300; i++)); do
	curl -fsS -m 1 -o /dev/null "http://$ADDR/v2/" 2>/dev/null && break
	sleep 0.1
done
mkdir -p "$work/fs"
echo "the image the client fetches" >"$work/fs/payload"
tar -cf "$work/app.tar" -C "$work/fs" .
docker import "$work/app.tar" "$IMAGE" >/dev/null
docker push "$IMAGE" >/dev/null
wait_fetch

# client FILE: fetches every 200 ms until killed, one line "END_MS ok|FAIL" a fetch.
client() {
	local out=$1 r
	: >"$out"
	(
		while :; do
			if fetch; then r=ok; else r=FAIL; fi
			echo "$(now_ms) $r" >>"$out"
			sleep 0.2
		done
	) &
	client=$!
}
client_stop() {
	kill "$client" 2>/dev/null || true
	wait "$client" 2>/dev/null || true
	client=
}

# kills SINCE UNTIL: the first kill event of each container of the module between the two
# (ms), one line "MS ID" a container, in order.
kills() {
	docker events --since "$1" --until "$2" --filter type=container --filter event=kill \
		--filter "label=io.meshctl.managed=$id" --format '{{.TimeNano}} {{.ID}}' |
		awk '!seen[$2]++ { printf "%.3f %s\n", $1 / 1e6, $2 }'
}

# switch_ms FETCHES KILL_MS: from the kill to the first fetch that succeeds after it.
switch_ms() {
	awk -v k="$2" '$1 > k && $2 == "ok" { printf "%.0f\n", $1 - k; found = 1; exit }
		END { if (!found) exit 1 }' "$1"
}
# ok_share FETCHES FROM TO: the percentage of fetches ending in [FROM, TO] that succeed.
ok_share() {
	awk -v a="$2" -v b="$3" '$1 >= a && $1 <= b { n++; if ($2 == "ok") ok++ }
		END { if (n) printf "%.1f\n", 100 * ok / n; else print 0 }' "$1"
}
since_s() { awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 - 1 }'; }
until_s() { awk -v m="$1" 'BEGIN { printf "%.3f", m / 1000 + 1 }'; }

# window MODE: one window run of the step MODE with the client on; appends its share, and for
# changed its two switches.
window() {
	local mode=$1 f=$work/fetch-$1-$i.txt t0 t1 ks
	client "$f"
	sleep 1
	t0=$(now_ms)
	"${mc[@]}" -q window run --settle 0s "$MODULE" "$mode"
	t1=$(now_ms)
	# The close's switch may end after the exit (--settle 0s): the client runs on till then.
	wait_fetch
	sleep 0.5
	client_stop
	ok_share "$f" "$t0" "$t1" >>"$work/share-$mode.txt"
	if [[ $mode == changed ]]; then
		mapfile -t ks < <(kills "$(since_s "$t0")" "$(until_s "$t1")")
		((${#ks[@]} == 2)) || die "window $i: ${#ks[@]} kill events (want 2: the open's, the close's)"
		switch_ms "$f" "${ks[0]%% *}" >>"$work/open.ms" || die "window $i: no fetch succeeded after the open"
		switch_ms "$f" "${ks[1]%% *}" >>"$work/close.ms" || die "window $i: no fetch succeeded after the close"
		printf '  %s: share %s%%, open %s ms, close %s ms (%s s)\n' "$mode" "$(tail -1 "$work/share-$mode.txt")" \
			"$(tail -1 "$work/open.ms")" "$(tail -1 "$work/close.ms")" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')"
	else
		printf '  %s: share %s%% (%s s)\n' "$mode" "$(tail -1 "$work/share-$mode.txt")" \
			"$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1000 }')"
	fi
}

# engine_only: docker stop + docker start of the registry with the client on; appends its switch.
engine_only() {
	local f=$work/fetch-engine-$i.txt t0 t1 ks
	client "$f"
	sleep 1
	t0=$(now_ms)
	docker stop "$name" >/dev/null
	docker start "$name" >/dev/null
	wait_fetch
	sleep 0.5
	t1=$(now_ms)
	client_stop
	mapfile -t ks < <(kills "$(since_s "$t0")" "$(until_s "$t1")")
	((${#ks[@]} == 1)) || die "docker stop $i: ${#ks[@]} kill events (want 1)"
	switch_ms "$f" "${ks[0]%% *}" >>"$work/engine.ms" || die "docker stop $i: no fetch succeeded after the start"
	printf '  docker stop + start: %s ms\n' "$(tail -1 "$work/engine.ms")"
}

: >"$work/share-changed.txt"
: >"$work/share-stopped.txt"
: >"$work/open.ms"
: >"$work/close.ms"
: >"$work/engine.ms"
printf 'load average before: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
for ((i = 0; i < runs; i++)); do
	window changed
	window stopped
	engine_only
done
printf 'load average after: %s\n' "$(cut -d' ' -f1-3 /proc/loadavg)"

# Every window closed, and closed ok.
results=$("${mc[@]}" -o json window list --history 1000 | jq -r '[.history[].result] | unique | join(",")')
[[ $results == ok ]] || die "window results: $results (want only ok)"

printf 'manifest fetches every 200 ms through window run of a %s s step, registry at %s\n' "$step" "$ADDR"
printf '(%d runs of each, interleaved, medians; a switch is from the kill event to the first ok fetch)\n' "$runs"
bench_row "fetches ok through a while-changed window" "$(median <"$work/share-changed.txt")" \
	"the same through while-stopped" "$(median <"$work/share-stopped.txt")" % ">=95"
engine_ms=$(median <"$work/engine.ms")
bench_row "while-changed open: stop to first ok" "$(median <"$work/open.ms")" \
	"docker stop + docker start" "$engine_ms" ms 1.2
bench_row "while-changed close: stop to first ok" "$(median <"$work/close.ms")" \
	"docker stop + docker start" "$engine_ms" ms 1.2
