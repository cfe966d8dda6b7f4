#!/usr/bin/env bash
# startfirst.sh: requests lost by a client through start-first deploys, against Compose v5.
#   A client container on the module's network asks the service by name every 50 ms, each
#   request bounded to 2 s and never retried, as a browser or a probe behaves. Through
#   MESHCTL_BENCH_SF_DEPLOYS (default 20) start-first deploys of the service, it counts the
#   failed requests (goal: none). Compose v5 (scripts/peers.sh) deploys the same two services
#   with `up -d` beside it, interleaved, and its failed requests are the peer's figure.
#
# The client bounds a request with `timeout 2 wget`: this image's busybox wget crashes on -T.
# Run by scripts/bench (see apply.sh). The module sfbench and the project sfbench-compose are
# removed at the end.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"

readonly PROJECT=sfbench-compose
export LC_ALL=C
deploys=${MESHCTL_BENCH_SF_DEPLOYS:-20}

bench_env startfirst
state=$work/state
mesh=$work/mesh.yaml
cfile=$work/compose.yaml

bench_meshctl
compose=
if peers=$("$here/../peers.sh" 2>"$work/peers.log"); then
	eval "$peers"
else
	log "scripts/peers.sh could not build Docker Compose; no Compose figure"
	cat "$work/peers.log" >&2
fi

# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
	local rc=$?
	if [[ -n $compose && -e $cfile ]]; then
		"$compose" -p "$PROJECT" -f "$cfile" down -t 1 >/dev/null 2>&1 || true
	fi
	# The module's network, which bench_cleanup leaves: its containers go first.
	if [[ -s $state/id.json ]]; then
		id=$(jq -r .id "$state/id.json")
		docker ps -aq --filter "label=io.meshctl.managed=$id" | xargs -r docker rm -f >/dev/null || true
		docker network ls -q --filter "label=io.meshctl.managed=$id" | xargs -r docker network rm >/dev/null || true
	fi
	bench_cleanup
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mc=("$meshctl" --state-dir "$state" --docker-host "$DOCKER_HOST")

# The client's loop: one line "UPTIME ok|FAIL" a request. $$ is for Compose.
client_loop='while :; do if timeout 2 wget -qO/dev/null http://web:8080/ 2>/dev/null; then r=ok; else r=FAIL; fi; echo "$(cut -d" " -f1 /proc/uptime) $r"; sleep 0.05; done'
web_cmd='mkdir -p /w && echo ok > /w/index.html && exec httpd -f -p 8080 -h /w'

# mesh_file V: the service web, start-first, and its client on the module network.
mesh_file() {
	cat >"$mesh" <<YAML
modules:
  sfbench:
    networks: {net: {}}
    containers:
      web:
        image: meshtest/busybox:1
        networks: [net]
        update-order: start-first
        stop-grace-period: 2s
        init: true
        env: {V: "$1"}
        entrypoint: [/bin/sh, -c]
        command: ['$web_cmd']
        healthcheck: {test: [CMD, wget, -qO/dev/null, "http://127.0.0.1:8080/"], interval: 200ms, timeout: 2s, retries: 20}
      client:
        image: meshtest/busybox:1
        networks: [net]
        depends-on: [web]
        init: true
        entrypoint: [/bin/sh, -c]
        command: ['${client_loop}']
YAML
}
# compose_file V: the same two services as a Compose project on its default network.
compose_file() {
	cat >"$cfile" <<YAML
services:
  web:
    image: meshtest/busybox:1
    pull_policy: never
    init: true
    stop_grace_period: 2s
    environment: {V: "$1"}
    entrypoint: [/bin/sh, -c]
    command: ['$web_cmd']
    healthcheck: {test: [CMD, wget, -qO/dev/null, "http://127.0.0.1:8080/"], interval: 200ms, timeout: 2s, retries: 20}
  client:
    image: meshtest/busybox:1
    pull_policy: never
    init: true
    depends_on: [web]
    entrypoint: [/bin/sh, -c]
    command: ['${client_loop//\$/\$\$}']
YAML
}

# deploy WHO V: one deploy of version V by meshctl or compose; prints the requests that failed
# from half a second before it to 2.5 s after (a request bounded to 2 s has ended by then).
deploy() {
	local before client=sfbench.client
	[[ $1 == compose ]] && client=$PROJECT-client-1
	before=$(docker logs "$client" 2>/dev/null | wc -l)
	sleep 0.5
	if [[ $1 == compose ]]; then
		compose_file "$2"
		"$compose" -p "$PROJECT" -f "$cfile" up -d >/dev/null 2>&1
	else
		mesh_file "$2"
		"${mc[@]}" -q apply -f "$mesh" --settle 300ms
	fi
	sleep 2.5
	docker logs "$client" 2>/dev/null | tail -n +"$((before + 1))" | awk '$2 == "FAIL" { f++ } END { print f + 0 }'
}

mesh_file 0
"${mc[@]}" -q apply -f "$mesh" --settle 300ms
if [[ -n $compose ]]; then
	compose_file 0
	"$compose" -p "$PROJECT" -f "$cfile" up -d --wait >/dev/null 2>&1
fi
: >"$work/mc.txt"
: >"$work/compose.txt"
for ((i = 1; i <= deploys; i++)); do
	deploy meshctl "$i" >>"$work/mc.txt"
	if [[ -n $compose ]]; then deploy compose "$i" >>"$work/compose.txt"; fi
done
sum() { awk '{ s += $1 } END { print s + 0 }' "$1"; }
lost() { awk '$1 > 0 { n++ } END { print n + 0 }' "$1"; }
echo "a client by name every 50 ms, 2 s a request, no retry: $deploys deploys each, interleaved"
echo "  meshctl start-first: $(sum "$work/mc.txt") failed requests, in $(lost "$work/mc.txt") of $deploys deploys"
if [[ -n $compose ]]; then
	echo "  Compose $compose_version up -d: $(sum "$work/compose.txt") failed requests, in $(lost "$work/compose.txt") of $deploys deploys"
	bench_row "start-first deploy by name, no retry: failed requests ($deploys deploys)" "$(sum "$work/mc.txt")" \
		"Compose $compose_version up -d: failed requests" "$(sum "$work/compose.txt")" req -
else
	bench_row "start-first deploy by name, no retry: failed requests ($deploys deploys)" "$(sum "$work/mc.txt")" \
		"the goal" 0 req -
fi
