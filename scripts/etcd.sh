#!/usr/bin/env bash
# etcd.sh: a private 3-member etcd cluster on 127.0.0.1 for meshctl's tests.
#
# usage: scripts/etcd.sh start|stop|env|status|kill-member N|start-member N|build
#
#   start           build the server if needed, then start members 1..3 (data under
#                   $MESHCTL_ETCD_DIR/data, a temp dir) and wait until the cluster answers
#   stop            stop the members this script started, by their recorded pids; remove the data
#   env             print export lines for MESHCTL_TEST_ETCD (the client endpoints) and
#                   MESHCTL_TEST_ETCD_DIR; use with eval
#   status          exit 0 if every member answers its health check
#   kill-member N   SIGKILL member N (by its pid); start-member N starts it again on its data and
#                   waits until the cluster is healthy
#   build           build the server from scripts/etcd (go.etcd.io/etcd/server/v3 v3.7.3, its own
#                   module, through the Go module proxy; the first build takes minutes), and
#                   etcdutl (snapshot restore) beside it
#
# Home: $MESHCTL_ETCD_DIR (default /tmp/meshctl-etcd): bin/etcd, bin/etcdutl, etcd-N.pid, etcd-N.log,
# data/.
# Ports: clients 127.0.0.1:$((MESHCTL_ETCD_PORT)), +1, +2 (default 32379); peers 1000 above.
set -euo pipefail
shopt -s extglob

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${MESHCTL_ETCD_DIR:-/tmp/meshctl-etcd}
port=${MESHCTL_ETCD_PORT:-32379}
bin=$dir/bin/etcd
members=(1 2 3)

log() { printf 'etcd.sh: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}
usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit "${1:-2}"
}

client_url() { echo "http://127.0.0.1:$((port + $1 - 1))"; }
peer_url() { echo "http://127.0.0.1:$((port + 1000 + $1 - 1))"; }
endpoints() {
	local n out=
	for n in "${members[@]}"; do out+=${out:+,}127.0.0.1:$((port + n - 1)); done
	echo "$out"
}
cluster() {
	local n out=
	for n in "${members[@]}"; do out+=${out:+,}m$n=$(peer_url "$n"); done
	echo "$out"
}

# alive is true when pid names a live etcd process (not a zombie, and our binary: a reused pid
# is never signalled).
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	# A member started before a rebuild runs the replaced binary, "(deleted)".
	[[ ${stat%% *} != [ZX] ]] && [[ $(readlink "/proc/$1/exe" 2>/dev/null) == "$bin"?(" (deleted)") ]]
}
pid_of() {
	local pid
	[[ -s $dir/etcd-$1.pid ]] || return 1
	read -r pid <"$dir/etcd-$1.pid"
	alive "$pid" && echo "$pid"
}

build() {
	if [[ -x $bin && -x $dir/bin/etcdutl && $bin -nt $here/etcd/main.go && $bin -nt $here/etcd/go.sum ]]; then
		return 0
	fi
	command -v go >/dev/null || PATH=$PATH:/usr/local/go/bin
	mkdir -p "$dir/bin"
	log "building etcd and etcdutl v3.7.3 from $here/etcd (the first build takes minutes)"
	# etcdutl (snapshot restore) is a tool of the same module (go.mod's tool directive).
	(cd "$here/etcd" && go build -o "$dir/bin/etcdutl" go.etcd.io/etcd/etcdutl/v3 && go build -o "$bin.tmp" .) ||
		die "cannot build etcd (no Go module proxy?)"
	mv "$bin.tmp" "$bin"
}

start_member() {
	local n=$1 state=new
	pid_of "$n" >/dev/null && return 0
	[[ -d $dir/data/m$n ]] && state=existing
	mkdir -p "$dir/data"
	chmod 700 "$dir/data"
	setsid "$bin" --name "m$n" --data-dir "$dir/data/m$n" \
		--listen-client-urls "$(client_url "$n")" --advertise-client-urls "$(client_url "$n")" \
		--listen-peer-urls "$(peer_url "$n")" --initial-advertise-peer-urls "$(peer_url "$n")" \
		--initial-cluster "$(cluster)" --initial-cluster-state "$state" \
		--initial-cluster-token meshctl-test --heartbeat-interval 50 --election-timeout 500 \
		--log-level warn </dev/null >>"$dir/etcd-$n.log" 2>&1 &
	echo $! >"$dir/etcd-$n.pid"
}

healthy() {
	local n
	for n in "${members[@]}"; do
		curl -fsS -m 2 "$(client_url "$n")/health" 2>/dev/null | grep -q '"health":"true"' || return 1
	done
}

start() {
	build
	local n
	for n in "${members[@]}"; do start_member "$n"; done
	for _ in $(seq 1 150); do
		healthy && {
			log "cluster up at $(endpoints)"
			return 0
		}
		sleep 0.2
	done
	die "cluster did not become healthy in 30s; see $dir/etcd-*.log"
}

stop_member() {
	local n=$1 pid sig=${2:-TERM}
	pid=$(pid_of "$n") || {
		rm -f "$dir/etcd-$n.pid"
		return 0
	}
	kill "-$sig" "$pid"
	for _ in $(seq 1 100); do
		alive "$pid" || break
		sleep 0.1
	done
	alive "$pid" && kill -KILL "$pid"
	rm -f "$dir/etcd-$n.pid"
}

stop() {
	local n
	for n in "${members[@]}"; do stop_member "$n"; done
	rm -rf "$dir/data"
}

case ${1:-} in
start) start ;;
stop) stop ;;
env) printf 'export MESHCTL_TEST_ETCD=%s MESHCTL_TEST_ETCD_DIR=%s\n' "$(endpoints)" "$dir" ;;
status) healthy ;;
kill-member) stop_member "${2:?member number}" KILL ;;
start-member)
	start_member "${2:?member number}"
	for _ in $(seq 1 150); do
		healthy && exit 0
		sleep 0.2
	done
	die "member $2 did not rejoin a healthy cluster in 30s; see $dir/etcd-$2.log"
	;;
build) build ;;
-h | --help | help) usage 0 ;;
*) usage ;;
esac
