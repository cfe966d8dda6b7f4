#!/usr/bin/env bash
# hosts.sh: several hosts on one machine for meshctl's mesh tests: a private Docker engine each
# (scripts/engine.sh in a home of its own), beside the test engine, never the host's own.
#
# usage: scripts/hosts.sh start|stop|env|status
#
#   start   start the host engines that do not answer yet, side by side, and load the test images
#           into each (docker save from the test engine, docker load into each; scripts/images.sh
#           builds them in a host engine when the test engine lacks them)
#   stop    stop the host engines this script started in the run directory, each by its own pid
#           (engine.sh stop), and everything they left behind; nothing else is touched
#   env     print export lines for MESHCTL_HOSTS_DIR and MESHCTL_TEST_HOSTS
#           ('host-a=unix:///…/host-a/docker.sock,host-b=…'); use with eval
#   status  exit 0 if every host engine answers
#
# Run directory: MESHCTL_HOSTS_DIR (default /tmp/msh-XXXXXXXX, a hash of this checkout's path),
# one engine home per host under it: $MESHCTL_HOSTS_DIR/host-a, host-b, host-c (MESHCTL_HOSTS
# names others, at most 4). Each engine runs --bridge=none --iptables=false --ip6tables=false with
# its own slice of 198.19.0.0/16 as its network pool (host N: 198.19.(64N).0/18); the test engine
# has 198.18.0.0/16, so no two engines of the machine take the same subnet.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

readonly IMAGES=(meshtest/busybox:1 meshtest/registry:1)

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit "${1:-2}"
}

# checkout_hosts_dir prints the default run directory of this checkout.
checkout_hosts_dir() {
	local sum
	sum=$(printf '%s' "$(cd "$here/.." && pwd -P)" | cksum)
	printf '/tmp/msh-%08x\n' "${sum%% *}"
}

hosts_dir=${MESHCTL_HOSTS_DIR:-$(checkout_hosts_dir)}
read -r -a hosts <<<"${MESHCTL_HOSTS:-host-a host-b host-c}"

# host_env NAME I runs the rest of its arguments with the engine of host NAME (the Ith) as the
# engine of lib.sh: its home, its socket, its pool.
host_env() {
	local name=$1 i=$2
	shift 2
	env -u MESHCTL_TEST_DOCKER_HOST -u DOCKER_HOST MESHCTL_ENGINE_DIR="$hosts_dir/$name" \
		MESHCTL_ENGINE_POOL="198.19.$((i * 64)).0/18" "$@"
}

host_sock() { echo "unix://$hosts_dir/$1/docker.sock"; }

host_answers() {
	timeout 10 env -u DOCKER_CONTEXT DOCKER_CONFIG="$hosts_dir/$1/cli" \
		docker -H "$(host_sock "$1")" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

# host_has_images is true when host NAME has every test image.
host_has_images() {
	env -u DOCKER_CONTEXT DOCKER_CONFIG="$hosts_dir/$1/cli" \
		docker -H "$(host_sock "$1")" image inspect "${IMAGES[@]}" >/dev/null 2>&1
}

check_hosts() {
	((${#hosts[@]} >= 1 && ${#hosts[@]} <= 4)) || die "MESHCTL_HOSTS: name 1 to 4 hosts"
	local h
	for h in "${hosts[@]}"; do
		[[ $h =~ ^[a-z][a-z0-9-]{0,15}$ ]] || die "MESHCTL_HOSTS: $h is not a host name (a-z, 0-9, -)"
	done
	[[ $hosts_dir =~ ^/[A-Za-z0-9._/-]+$ ]] || die "MESHCTL_HOSTS_DIR=$hosts_dir: use only letters, digits and ._/- in it"
}

# load_images puts the test images into every host engine: one docker save from the test engine,
# loaded into the hosts side by side; a host that already has them is skipped.
load_images() {
	local h pids=() rc=0 tar need=()
	for h in "${hosts[@]}"; do
		host_has_images "$h" || need+=("$h")
	done
	((${#need[@]})) || return 0
	if engine_answers && dk image inspect "${IMAGES[@]}" >/dev/null 2>&1; then
		tar=$hosts_dir/images.tar
		dk save -o "$tar" "${IMAGES[@]}"
		for h in "${need[@]}"; do
			env -u DOCKER_CONTEXT DOCKER_CONFIG="$hosts_dir/$h/cli" \
				docker -H "$(host_sock "$h")" load -q -i "$tar" >/dev/null &
			pids+=($!)
		done
		for h in "${pids[@]}"; do wait "$h" || rc=1; done
		rm -f "$tar"
		((rc == 0)) || die "cannot load the test images into the host engines"
		log "test images loaded into ${need[*]} from $ENGINE_HOST"
		return 0
	fi
	log "the test engine at $ENGINE_HOST lacks the test images: building them in each host engine"
	for h in "${need[@]}"; do
		MESHCTL_TEST_DOCKER_HOST=$(host_sock "$h") MESHCTL_ENGINE_DIR=$hosts_dir/$h "$here/images.sh" ||
			die "cannot build the test images in $h"
	done
}

cmd_start() {
	((EUID == 0)) || die "private host engines need root"
	mkdir -p "$hosts_dir"
	chmod 0755 "$hosts_dir"
	local i h pids=() rc=0 mine=()
	for i in "${!hosts[@]}"; do
		h=${hosts[i]}
		host_answers "$h" && continue
		mine+=("$i")
		host_env "$h" "$i" "$here/engine.sh" start 2>&1 | sed "s/^/$h: /" >&2 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	for h in "${hosts[@]}"; do
		host_answers "$h" || rc=1
	done
	if ((rc == 0)) && ! (load_images); then
		rc=1
	fi
	if ((rc != 0)); then
		# Fail closed: the engines this start started are stopped again.
		for i in "${mine[@]}"; do
			host_env "${hosts[i]}" "$i" "$here/engine.sh" stop 2>&1 | sed "s/^/${hosts[i]}: /" >&2 || true
		done
		die "the host engines are not ready (logs in $hosts_dir/HOST/dockerd.log); those this start started are stopped"
	fi
	log "host engines up: ${hosts[*]} in $hosts_dir"
}

cmd_stop() {
	[[ -d $hosts_dir ]] || {
		log "no host engines in $hosts_dir"
		return 0
	}
	local i h pids=() rc=0
	for i in "${!hosts[@]}"; do
		h=${hosts[i]}
		[[ -d $hosts_dir/$h ]] || continue
		host_env "$h" "$i" "$here/engine.sh" stop 2>&1 | sed "s/^/$h: /" >&2 &
		pids+=($!)
	done
	for i in "${pids[@]}"; do wait "$i" || rc=1; done
	return "$rc"
}

cmd_env() {
	local h list=()
	for h in "${hosts[@]}"; do list+=("$h=$(host_sock "$h")"); done
	printf 'export MESHCTL_HOSTS_DIR=%q\n' "$hosts_dir"
	# The names and paths are checked (check_hosts): single quotes are enough.
	printf "export MESHCTL_TEST_HOSTS='%s'\n" "$(
		IFS=,
		echo "${list[*]}"
	)"
}

cmd_status() {
	local h rc=0
	for h in "${hosts[@]}"; do
		if host_answers "$h"; then
			log "$h answers at $(host_sock "$h")"
		else
			log "$h: no engine answers at $(host_sock "$h")"
			rc=1
		fi
	done
	return "$rc"
}

(($# == 1)) || usage
check_hosts
case $1 in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) cmd_status ;;
-h | --help | help) usage 0 ;;
*) usage ;;
esac
