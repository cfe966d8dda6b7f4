#!/usr/bin/env bash
# deploy.sh: what a deploy costs beyond the engine's own work, each figure against its
# peer in the same run:
#   - the stop-first gap: a client asks the service on 127.0.0.1 every 50 ms through a
#     `meshctl apply` that recreates it (defaults); the longest time without an answer, against the
#     same client's longest gap through `docker stop` + `docker start` of the same container, the
#     engine's floor (target: at most 1.1x);
#   - 40 changed containers: `meshctl apply` recreating them with --settle 0s against `docker run -d`
#     of 40 new ones at the same parallelism (4, apply's default), the engine's floor (target: at
#     most 1.1x), and with the defaults (a 3 s settle each) against that floor plus one settle period
#     (target: at most 1.1x: the health waits overlap, they hold no --parallel slot);
#   - the same recreate by hand with the docker CLI (stop, run, rm), which shows what of the miss
#     against `docker run` is the old containers' stop and removal;
#   - Docker Compose v5 (scripts/peers.sh; else a `docker-compose` on PATH): `up -d --wait`
#     recreating the same 40, against meshctl's defaults less one settle period (target: at most
#     1.1x), and its `up -d` of the by-name service below, its failed requests and longest gap;
#   - start-first: a client container calling the service by name every 50 ms on its
#     module network through a start-first deploy (goal: no failed request) and through a
#     stop-first one, the failed requests and the longest gap of each.
#
# Run by scripts/bench (see apply.sh). MESHCTL_BENCH_DEPLOY_RUNS (default 7) gap runs and
# MESHCTL_BENCH_CHANGE_RUNS (default 3) rounds of 40 changes. The client only ever calls
# 127.0.0.1; the containers (modules dpbench, dpsf, dpchange, labels meshctl-bench-floor and -hand) are removed at the
# end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly N=40 PAR=4 SETTLE_MS=3000 PROJECT=dpbench-compose
export LC_ALL=C
runs=${MESHCTL_BENCH_DEPLOY_RUNS:-7}
rounds=${MESHCTL_BENCH_CHANGE_RUNS:-3}

bench_env deploy
state=$work/state
mesh=$work/mesh.yaml
cfile=$work/compose.yaml

bench_meshctl
command -v curl >/dev/null || die "curl is needed for the client"
# Compose: v5, built from source at its pinned version by scripts/peers.sh; where that cannot be
# had, a `docker-compose` on PATH (Debian's 1.29); else no Compose rows.
compose=
if peers=$("$here/../peers.sh" 2>"$work/peers.log"); then
	eval "$peers"
else
	log "scripts/peers.sh could not build Docker Compose (see below); trying docker-compose on PATH"
	cat "$work/peers.log" >&2
	compose=$(command -v docker-compose || true)
fi
compose_name= cwait=()
if [[ -n $compose ]]; then
	compose_name="Compose ${compose_version:-$("$compose" version --short 2>/dev/null || echo '?')}"
	# Debian's 1.29 has no --wait.
	"$compose" up --help 2>/dev/null | grep -q -- --wait && cwait=(--wait)
fi
readonly SFC_PROJECT=dpsfc
sfcfile=$work/sfc-compose.yaml

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local rc=$?
	[[ -n ${poller:-} ]] && kill "$poller" 2>/dev/null
	if [[ -n $compose && -e $cfile ]]; then
		"$compose" -p "$PROJECT" -f "$cfile" down -t 1 >/dev/null 2>&1 || true
	fi
	if [[ -n $compose && -e $sfcfile ]]; then
		"$compose" -p "$SFC_PROJECT" -f "$sfcfile" down -t 1 >/dev/null 2>&1 || true
	fi
	docker ps -aq --filter "label=meshctl-bench-floor=1" | xargs -r -n 16 docker rm -f >/dev/null || true
	docker ps -aq --filter "label=meshctl-bench-hand=1" | xargs -r -n 16 docker rm -f >/dev/null || true
	bench_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mc=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST")

# --- the stop-first gap -------------------------------------------------------------------------

port=$((20000 + RANDOM % 20000))
name=dpbench.web
# The service answers on 127.0.0.1:$port (host network: the test engine has no bridge to publish
# a port through) and stops at once on SIGTERM, so that neither side waits
# out a stop timeout; V changes on each deploy.
web_file() {
	cat >"$mesh" <<YAML
modules:
  dpbench:
    containers:
      web:
        image: meshtest/busybox:1
        entrypoint: [/bin/sh, -c]
        command: ["mkdir -p /w && echo ok >/w/index.html; httpd -f -p 127.0.0.1:$port -h /w & trap 'kill \$!; exit 0' TERM; wait"]
        env: {V: "$1"}
        network: host
YAML
}

# poll OUT: every 50 ms, ask the service; write the time of each answer to OUT, until $work/stop.
poll() {
	rm -f "$work/stop"
	while [[ ! -e $work/stop ]]; do
		if curl -sf -o /dev/null -m 0.5 "http://127.0.0.1:$port/"; then now_ms; fi
		sleep 0.05
	done >"$1"
}

# gap CMD...: the longest time without an answer, in ms, while CMD runs, the client asking from
# half a second before it to half a second after.
gap() {
	poll "$work/answers" &
	poller=$!
	sleep 0.5
	"$@" >/dev/null
	sleep 0.5
	touch "$work/stop"
	wait "$poller"
	poller=
	awk 'NR > 1 && $1 - p > g { g = $1 - p } { p = $1 } END { printf "%.1f\n", g }' "$work/answers"
}

v=0
deploy() {
	v=$((v + 1))
	web_file "$v"
	"${mc[@]}" -q apply -f "$mesh"
}
engine_only() { docker stop "$name" >/dev/null && docker start "$name" >/dev/null; }

web_file 0
"${mc[@]}" -q apply -f "$mesh" --settle 0s
for ((i = 0; i < 2; i++)); do deploy; engine_only; done
: >"$work/deploy.ms"
: >"$work/floor.ms"
for ((i = 0; i < runs; i++)); do
	gap deploy >>"$work/deploy.ms"
	gap engine_only >>"$work/floor.ms"
done
echo "stop-first deploy gap seen by a client every 50 ms ($runs runs each, interleaved, medians)"
bench_row "stop-first deploy: longest gap" "$(median <"$work/deploy.ms")" "docker stop + docker start" "$(median <"$work/floor.ms")" ms 1.1
"${mc[@]}" -q apply --remove-module dpbench

# --- start-first, by name --------------------------------------------------------------------------

# A client container on the module's network asks web by name every 50 ms (a failed connection
# retried once, as an HTTP client retries a GET) and writes "UPTIME ok|FAIL" for each request; a
# deploy of web, start-first or stop-first, is judged by the client's lines from half a second
# before it to half a second after: the requests that failed, and the longest time between two
# answers.
sf_file() {
	cat >"$mesh" <<YAML
modules:
  dpsf:
    networks: {net: {}}
    containers:
      web:
        image: meshtest/busybox:1
        networks: [net]
        update-order: $1
        drain: 300ms
        stop-grace-period: 2s
        init: true
        env: {V: "$2"}
        entrypoint: [/bin/sh, -c]
        command: ['mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 8080 -h /w']
        healthcheck: {test: [CMD, wget, -qO/dev/null, "http://127.0.0.1:8080/"], interval: 200ms, timeout: 2s, retries: 20}
      client:
        image: meshtest/busybox:1
        networks: [net]
        depends-on: [web]
        init: true
        entrypoint: [/bin/sh, -c]
        command:
          - |
            ask() { timeout 2 wget -qO/dev/null http://web:8080/ 2>/dev/null || timeout 2 wget -qO/dev/null http://web:8080/ 2>/dev/null; }
            while :; do
              if ask; then r=ok; else r=FAIL; fi
              echo "\$(cut -d' ' -f1 /proc/uptime) \$r"
              sleep 0.05
            done
YAML
}
# sfc_file V: the same two services as a Compose project (its default network, the client's
# depends_on in short form, so that Compose's recreate of web leaves the client running).
sfc_file() {
	cat >"$sfcfile" <<YAML
services:
  web:
    image: meshtest/busybox:1
    pull_policy: never
    init: true
    stop_grace_period: 2s
    environment: {V: "$1"}
    entrypoint: [/bin/sh, -c]
    command: ['mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 8080 -h /w']
    healthcheck: {test: [CMD, wget, -qO/dev/null, "http://127.0.0.1:8080/"], interval: 200ms, timeout: 2s, retries: 20}
  client:
    image: meshtest/busybox:1
    pull_policy: never
    init: true
    depends_on: [web]
    entrypoint: [/bin/sh, -c]
    command:
      - |
        ask() { timeout 2 wget -qO/dev/null http://web:8080/ 2>/dev/null || timeout 2 wget -qO/dev/null http://web:8080/ 2>/dev/null; }
        while :; do
          if ask; then r=ok; else r=FAIL; fi
          echo "\$\$(cut -d' ' -f1 /proc/uptime) \$\$r"
          sleep 0.05
        done
YAML
}
# sf_deploy ORDER: deploy a new version of web (ORDER start-first or stop-first with meshctl,
# compose with Compose's `up -d`); prints "FAILED GAP_MS" seen by the client. With ORDER "idle",
# no deploy: the client's own longest gap over as long a time, the peer of the gap.
sf_v=0
sf_deploy() {
	local before t0 client=dpsf.client
	if [[ $1 == compose ]]; then
		client=$SFC_PROJECT-client-1
	fi
	if [[ $1 != idle ]]; then
		sf_v=$((sf_v + 1))
		if [[ $1 == compose ]]; then sfc_file "$sf_v"; else sf_file "$1" "$sf_v"; fi
	fi
	sleep 0.5
	before=$(docker logs "$client" 2>/dev/null | wc -l)
	t0=$(now_ms)
	case $1 in
	idle) sleep "$(awk -v ms="${sf_last_ms:-1500}" 'BEGIN { printf "%.3f", ms / 1000 }')" ;;
	compose) "$compose" -p "$SFC_PROJECT" -f "$sfcfile" up -d >/dev/null 2>&1 ;;
	*)
		"${mc[@]}" -q apply -f "$mesh" --settle 300ms
		sf_last_ms=$(awk -v a="$t0" -v b="$(now_ms)" 'BEGIN { printf "%.0f", b - a }')
		;;
	esac
	sleep 0.5
	docker logs "$client" 2>/dev/null | tail -n +"$((before + 1))" |
		awk '$2 == "FAIL" { f++ } $2 == "ok" { if (p != "" && $1 - p > g) g = $1 - p; p = $1 } END { printf "%d %.0f\n", f, g * 1000 }'
}
sf_file stop-first 0
"${mc[@]}" -q apply -f "$mesh" --settle 300ms
if [[ -n $compose ]]; then
	sfc_file 0
	"$compose" -p "$SFC_PROJECT" -f "$sfcfile" up -d "${cwait[@]}" >/dev/null 2>&1
fi
: >"$work/sf.txt"
: >"$work/so.txt"
: >"$work/idle.txt"
: >"$work/sfc.txt"
for ((i = 0; i < runs; i++)); do
	sf_deploy start-first >>"$work/sf.txt"
	sf_deploy idle >>"$work/idle.txt"
	sf_deploy stop-first >>"$work/so.txt"
	if [[ -n $compose ]]; then
		sf_deploy compose >>"$work/sfc.txt"
	fi
done
# A stop-first deploy's requests fail while no container answers to the name (a lookup of a name
# the engine does not know waits for upstream DNS, which this engine cannot reach): its gap is
# not comparable, its failed requests are.
echo "a client calling web by name every 50 ms through a deploy ($runs runs each, interleaved)"
bench_row "start-first deploy: failed requests" "$(awk '{ s += $1 } END { print s + 0 }' "$work/sf.txt")" \
	"stop-first deploy: failed requests" "$(awk '{ s += $1 } END { print s + 0 }' "$work/so.txt")" req -
bench_row "start-first deploy: longest gap (median)" "$(cut -d' ' -f2 "$work/sf.txt" | median)" \
	"no deploy, as long: longest gap (median)" "$(cut -d' ' -f2 "$work/idle.txt" | median)" ms -
if [[ -n $compose ]]; then
	bench_row "start-first deploy: failed requests" "$(awk '{ s += $1 } END { print s + 0 }' "$work/sf.txt")" \
		"$compose_name up -d: failed requests" "$(awk '{ s += $1 } END { print s + 0 }' "$work/sfc.txt")" req -
	bench_row "start-first deploy: longest gap (median)" "$(cut -d' ' -f2 "$work/sf.txt" | median)" \
		"$compose_name up -d: longest gap (median)" "$(cut -d' ' -f2 "$work/sfc.txt" | median)" ms -
	"$compose" -p "$SFC_PROJECT" -f "$sfcfile" down -t 1 >/dev/null 2>&1 || true
fi
"${mc[@]}" -q apply --remove-module dpsf

# --- 40 changed containers ----------------------------------------------------------------------

# files V writes the mesh file and the compose file of the same N services, env BENCH_V=V.
files() {
	{
		echo "modules:"
		echo "  dpchange:"
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
		done
	} >"$cfile"
}
floor_run() {
	local i
	for ((i = 1; i <= N; i++)); do echo "$i"; done |
		xargs -P "$PAR" -I{} docker run -d --label meshctl-bench-floor=1 --network none \
			-e BENCH={} -e BENCH_V="$1" meshtest/busybox:1 sh -c "trap 'exit 0' TERM; sleep 86400 & wait" >/dev/null
}
floor_rm() { docker ps -aq --filter "label=meshctl-bench-floor=1" | xargs -r -n 16 docker rm -f >/dev/null; }
# cli_recreate V: a stop-first recreate of the floor's 40 by hand, 4 at once: docker stop of the old
# one, docker run of the new one, docker rm of the old one: the engine work a recreate does, less
# the renames and the health look.
cli_recreate() {
	local i
	for ((i = 1; i <= N; i++)); do echo "$i"; done |
		xargs -P "$PAR" -I{} sh -c 'docker stop -t 10 dpfloor-{} >/dev/null && docker rename dpfloor-{} dpfloor-{}-old &&
			docker run -d --name dpfloor-{} --label meshctl-bench-hand=1 --network none -e BENCH={} -e BENCH_V="$1" \
				meshtest/busybox:1 sh -c "trap '"'"'exit 0'"'"' TERM; sleep 86400 & wait" >/dev/null && docker rm dpfloor-{}-old >/dev/null' _ "$1"
}

files a
log "starting $N services"
"${mc[@]}" -q apply -f "$mesh" --settle 0s
if [[ -n $compose ]]; then
	"$compose" -p "$PROJECT" -f "$cfile" up -d >/dev/null 2>&1
else
	log "no Docker Compose (scripts/peers.sh, or docker-compose on PATH): no Compose row"
fi
: >"$work/m0.ms"
: >"$work/mdef.ms"
: >"$work/run.ms"
: >"$work/cup.ms"
: >"$work/cli.ms"
# The by-hand recreate's 40, named dpfloor-N.
for ((i = 1; i <= N; i++)); do echo "$i"; done |
	xargs -P "$PAR" -I{} docker run -d --name dpfloor-{} --label meshctl-bench-hand=1 --network none \
		meshtest/busybox:1 sh -c "trap 'exit 0' TERM; sleep 86400 & wait" >/dev/null
c=0
for ((r = 0; r < rounds; r++)); do
	c=$((c + 1))
	files "$c"
	time_ms "${mc[@]}" -q apply -f "$mesh" --settle 0s >>"$work/m0.ms"
	c=$((c + 1))
	files "$c"
	time_ms "${mc[@]}" -q apply -f "$mesh" >>"$work/mdef.ms"
	time_ms floor_run "$c" >>"$work/run.ms"
	floor_rm
	time_ms cli_recreate "$c" >>"$work/cli.ms"
	if [[ -n $compose ]]; then
		time_ms "$compose" -p "$PROJECT" -f "$cfile" up -d "${cwait[@]}" >>"$work/cup.ms" 2>/dev/null
	fi
done
m0=$(median <"$work/m0.ms")
mdef=$(median <"$work/mdef.ms")
floor=$(median <"$work/run.ms")
echo "$N changed containers, $PAR at once ($rounds rounds, medians)"
bench_row "recreate $N changed, --settle 0s" "$m0" "docker run -d x$N, $PAR at once" "$floor" ms 1.1
bench_row "recreate $N changed, defaults (settle 3s)" "$mdef" "docker run -d x$N + one settle (3 s)" \
	"$(awk -v f="$floor" -v s="$SETTLE_MS" 'BEGIN { printf "%.1f", f + s }')" ms 1.1
bench_row "recreate $N changed, --settle 0s" "$m0" "docker stop + run + rm x$N by hand, $PAR at once" "$(median <"$work/cli.ms")" ms -
if [[ -n $compose ]]; then
	bench_row "recreate $N changed, defaults, less one settle (3 s)" \
		"$(awk -v m="$mdef" -v s="$SETTLE_MS" 'BEGIN { printf "%.1f", m - s }')" \
		"$compose_name up -d ${cwait[*]}" "$(median <"$work/cup.ms")" ms 1.1
fi
