#!/usr/bin/env bash
# engine.sh: a private Docker engine for meshctl's tests, never the host's own.
#
# usage: scripts/engine.sh start|stop|env|status
#
#   start   start containerd and dockerd under $MESHCTL_ENGINE_DIR (default: this checkout's
#           /tmp/meshctl-engine-XXXXXXXX, see lib.sh),
#           unless an engine already answers at $MESHCTL_TEST_DOCKER_HOST; installs docker.io
#           with apt-get when dockerd is missing (root only)
#   stop    stop the engine this script started there, and everything it left behind; an engine
#           in another home (another checkout's, or a test run's own) is never touched
#   env     print export lines for MESHCTL_ENGINE_DIR, DOCKER_HOST and MESHCTL_TEST_DOCKER_HOST;
#           use with eval
#   status  exit 0 if the engine answers
#
# Engine home layout:
#   docker.sock  dockerd.pid  dockerd.log  daemon.json     the Docker engine
#   containerd.pid  containerd.log  containerd.toml        its own containerd
#   storage-driver                                         overlay2 or vfs, chosen at first start
#   data/  (dockerd --data-root; data/containerd: containerd's root)
#   exec/  (dockerd --exec-root; exec/containerd: containerd's state and socket)
#   cli/   (DOCKER_CONFIG of the scripts' docker CLI)   engine.lock (serialises start and stop)
#
# Environment: MESHCTL_ENGINE_STORAGE_DRIVER forces a storage driver; MESHCTL_ENGINE_START_TIMEOUT
# (seconds, default 60) and MESHCTL_ENGINE_STOP_TIMEOUT (default 30) bound the waits;
# MESHCTL_ENGINE_POOL is the engine's network pool (default 198.18.0.0/16: the test engine's slice
# of 198.18.0.0/15; scripts/hosts.sh gives each host engine a slice of 198.19.0.0/16).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

start_timeout=${MESHCTL_ENGINE_START_TIMEOUT:-60}
pool=${MESHCTL_ENGINE_POOL:-198.18.0.0/16}
stop_timeout=${MESHCTL_ENGINE_STOP_TIMEOUT:-30}
containerd_sock=$ENGINE_DIR/exec/containerd/containerd.sock

usage() {
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit "${1:-2}"
}

# fail reports why the engine cannot be had. Under CI that fails the run; elsewhere the caller
# decides (scripts/test then runs the tests without an engine).
fail() {
	if is_ci; then
		die "$* (CI=true: the engine is required)"
	fi
	die "$* (engine unavailable)"
}

# alive is true when pid names a process that has not exited (a zombie has).
alive() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) }
	[[ ${stat%% *} != [ZX] ]]
}

# our_pid prints the pid recorded in a pid file of the engine home when that process is alive and
# was started from this engine home; the check keeps a reused pid from being signalled.
our_pid() {
	local file=$ENGINE_DIR/$1 pid=
	[[ -s $file ]] || return 1
	read -r pid <"$file" || [[ -n $pid ]] || return 1 # dockerd writes no final newline
	[[ $pid =~ ^[1-9][0-9]*$ ]] && alive "$pid" || return 1
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -qF -- "$ENGINE_DIR/" || return 1
	echo "$pid"
}

# terminate sends SIGTERM to pid, waits up to $2 seconds, then sends SIGKILL.
terminate() {
	local pid=$1 secs=$2 what=$3 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < secs * 10; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "$what (pid $pid) still running after ${secs}s; sending SIGKILL"
	kill -KILL "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	log "$what (pid $pid) survived SIGKILL"
}

# our_shims prints the pids of the containerd shims of our containerd: they detach from it and
# outlive it, and name its socket on their command line ("-address SOCKET").
our_shims() {
	local proc args i
	for proc in /proc/[1-9]*; do
		# The redirection to /dev/null comes first: a process that exits between the glob and the
		# read must not print "No such file or directory".
		mapfile -d '' -t args 2>/dev/null <"$proc/cmdline" || continue
		if ((${#args[@]} < 3)) || [[ ${args[0]##*/} != containerd-shim* ]]; then
			continue
		fi
		for ((i = 1; i < ${#args[@]} - 1; i++)); do
			if [[ ${args[i]} == -address && ${args[i + 1]} == "$containerd_sock" ]]; then
				if alive "${proc#/proc/}"; then echo "${proc#/proc/}"; fi
				break
			fi
		done
	done
}

# install_engine installs Debian's docker.io when dockerd or its containerd and runc are missing.
install_engine() {
	local bin missing=()
	for bin in dockerd containerd containerd-shim-runc-v2 runc docker; do
		command -v "$bin" >/dev/null || missing+=("$bin")
	done
	((${#missing[@]})) || return 0
	((EUID == 0)) || fail "${missing[*]} not installed; run as root or apt-get install docker.io"
	log "${missing[*]} not installed; installing docker.io with apt-get"
	apt-get update -q >&2 || fail "apt-get update failed"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io >&2 ||
		fail "apt-get install docker.io failed"
	for bin in "${missing[@]}"; do
		command -v "$bin" >/dev/null || fail "$bin still missing after installing docker.io"
	done
}

# storage_driver prints the driver to use: the one forced, else the one this data root was first
# started with, else overlay2 if an overlay mount works on the engine home's filesystem, else vfs.
storage_driver() {
	if [[ -n ${MESHCTL_ENGINE_STORAGE_DRIVER:-} ]]; then
		echo "$MESHCTL_ENGINE_STORAGE_DRIVER"
		return
	fi
	if [[ -s $ENGINE_DIR/storage-driver ]]; then
		cat "$ENGINE_DIR/storage-driver"
		return
	fi
	local probe driver=vfs
	probe=$(mktemp -d "$ENGINE_DIR/probe.XXXXXX")
	mkdir "$probe/lower" "$probe/upper" "$probe/work" "$probe/merged"
	if mount -t overlay overlay \
		-o "lowerdir=$probe/lower,upperdir=$probe/upper,workdir=$probe/work" "$probe/merged" 2>/dev/null; then
		umount "$probe/merged"
		driver=overlay2
	fi
	rm -rf "$probe"
	echo "$driver"
}

# start_containerd starts a containerd of the engine's own. dockerd 20.10 would start one itself,
# but only when /run/containerd/containerd.sock does not exist: with a system containerd running
# it would share it, and its "moby" namespace, with the host's dockerd.
start_containerd() {
	mkdir -p "$ENGINE_DIR/data/containerd" "$ENGINE_DIR/exec/containerd"
	cat >"$ENGINE_DIR/containerd.toml" <<EOF
version = 2
root = "$ENGINE_DIR/data/containerd"
state = "$ENGINE_DIR/exec/containerd"
disabled_plugins = ["io.containerd.grpc.v1.cri"]

[grpc]
  address = "$containerd_sock"

[ttrpc]
  address = "$containerd_sock.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$ENGINE_DIR/data/containerd/opt"
EOF
	rm -f "$containerd_sock" "$containerd_sock.ttrpc"
	# setsid: the engine outlives this script and a Ctrl-C meant for the caller's job;
	# 9>&-: it must not inherit the engine lock.
	setsid containerd --config "$ENGINE_DIR/containerd.toml" \
		>>"$ENGINE_DIR/containerd.log" 2>&1 </dev/null 9>&- &
	local pid=$! i
	echo "$pid" >"$ENGINE_DIR/containerd.pid"
	for ((i = 0; i < 200; i++)); do
		[[ -S $containerd_sock ]] && return 0
		alive "$pid" || break
		sleep 0.1
	done
	log "containerd did not come up; last lines of $ENGINE_DIR/containerd.log:"
	tail -n 30 "$ENGINE_DIR/containerd.log" >&2 || true
	return 1
}

# start_dockerd starts dockerd with the given storage driver and waits until it answers.
start_dockerd() {
	local driver=$1 pid i
	[[ -e $ENGINE_DIR/daemon.json ]] || echo '{}' >"$ENGINE_DIR/daemon.json"
	rm -f "$ENGINE_SOCK"
	log "starting dockerd (storage driver $driver), log in $ENGINE_DIR/dockerd.log"
	# --config-file: never read the host's /etc/docker/daemon.json.
	# --containerd: our own containerd (see start_containerd).
	# --bridge=none and no iptables: the engine touches no host network configuration.
	# --default-address-pool: networks a test creates take addresses in $pool, a slice of
	# 198.18.0.0/15 (the benchmarking range), never in 10/8, 172.16/12 or 192.168/16. No two engines
	# of the machine share a slice: their bridges would take the same subnet.
	setsid dockerd \
		--config-file "$ENGINE_DIR/daemon.json" \
		--host "$ENGINE_PRIVATE_HOST" \
		--data-root "$ENGINE_DIR/data" \
		--exec-root "$ENGINE_DIR/exec" \
		--pidfile "$ENGINE_DIR/dockerd.pid" \
		--containerd "$containerd_sock" \
		--storage-driver "$driver" \
		--bridge=none --iptables=false --ip6tables=false \
		--default-address-pool "base=$pool,size=24" \
		>>"$ENGINE_DIR/dockerd.log" 2>&1 </dev/null 9>&- &
	pid=$!
	for ((i = 0; i < start_timeout * 4; i++)); do
		engine_answers && return 0
		alive "$pid" || break
		sleep 0.25
	done
	if alive "$pid"; then
		log "dockerd did not answer within ${start_timeout}s; last lines of $ENGINE_DIR/dockerd.log:"
		terminate "$pid" 10 dockerd
	else
		log "dockerd exited; last lines of $ENGINE_DIR/dockerd.log:"
	fi
	tail -n 30 "$ENGINE_DIR/dockerd.log" >&2 || true
	return 1
}

lock() {
	exec 9>"$ENGINE_DIR/engine.lock"
	flock 9
}

cmd_start() {
	if engine_answers; then
		log "an engine already answers at $ENGINE_HOST"
		return 0
	fi
	[[ $ENGINE_HOST == "$ENGINE_PRIVATE_HOST" ]] ||
		fail "MESHCTL_TEST_DOCKER_HOST=$ENGINE_HOST does not answer; unset it to start a private engine in $ENGINE_DIR"
	((EUID == 0)) || fail "a private dockerd needs root"
	install_engine
	mkdir -p "$ENGINE_DIR"
	chmod 0755 "$ENGINE_DIR"
	lock
	if engine_answers; then # another start won the lock
		log "an engine already answers at $ENGINE_HOST"
		return 0
	fi
	# Ours but not answering (hung, or half-stopped): clear it away first.
	stop_engine quiet

	local driver
	driver=$(storage_driver)
	: >"$ENGINE_DIR/containerd.log"
	: >"$ENGINE_DIR/dockerd.log"
	start_containerd || {
		stop_engine quiet
		fail "cannot start containerd"
	}
	if ! start_dockerd "$driver"; then
		# overlay2 can pass the mount probe and still be refused by dockerd (e.g. the data root
		# sits on overlayfs or lacks d_type): vfs works anywhere, slowly.
		if [[ $driver == overlay2 && -z ${MESHCTL_ENGINE_STORAGE_DRIVER:-} ]] &&
			grep -qiE 'overlay|storage.driver|graphdriver|d_type' "$ENGINE_DIR/dockerd.log"; then
			log "overlay2 refused; retrying with the vfs storage driver"
			driver=vfs
			start_dockerd "$driver" || {
				stop_engine quiet
				fail "cannot start dockerd"
			}
		else
			stop_engine quiet
			fail "cannot start dockerd"
		fi
	fi
	echo "$driver" >"$ENGINE_DIR/storage-driver"
	log "engine up at $ENGINE_HOST (dockerd $(dk version --format '{{.Server.Version}}'), storage driver $(dk info --format '{{.Driver}}'))"
}

# stop_engine stops what this script started in the engine home: dockerd, then the containers and
# shims a killed dockerd can leave running, then containerd, then stale mounts.
stop_engine() {
	local quiet=${1:-} pid found=0 root id line mnt child
	if pid=$(our_pid dockerd.pid); then
		found=1
		[[ -n $quiet ]] || log "stopping dockerd (pid $pid)"
		# dockerd stops its containers first (no live-restore); a container that ignores SIGTERM
		# costs its stop timeout, 10s by default.
		terminate "$pid" "$stop_timeout" dockerd
	fi
	# Containers still running: only possible if dockerd was killed. runc's state for them is
	# under the exec root, one directory per containerd namespace.
	for root in "$ENGINE_DIR"/exec/runtime-runc/*/; do
		[[ -d $root ]] || continue
		for id in $(runc --root "$root" list -q 2>/dev/null); do
			found=1
			log "killing leftover container $id"
			runc --root "$root" kill "$id" KILL 2>/dev/null || true
			runc --root "$root" delete --force "$id" 2>/dev/null || true
		done
	done
	if pid=$(our_pid containerd.pid); then
		found=1
		[[ -n $quiet ]] || log "stopping containerd (pid $pid)"
		terminate "$pid" 10 containerd
	fi
	# A shim's children are its containers' first processes. Killed with it, they would be left
	# running under init, with no engine to stop them: 542 of them once, from one stop of an
	# engine of 1000 containers, each with its own processes, slowing the whole machine. Each
	# goes first, which takes its container's processes with it.
	for pid in $(our_shims); do
		found=1
		log "stopping leftover shim (pid $pid) and its containers"
		for child in $(ps -o pid= --ppid "$pid" 2>/dev/null); do
			kill -KILL "$child" 2>/dev/null || true
		done
		terminate "$pid" 5 containerd-shim
	done
	# Mounts a killed dockerd leaves (overlay layers, network namespaces), deepest first.
	while read -r mnt; do
		found=1
		umount -l "$mnt" 2>/dev/null || log "cannot unmount $mnt"
	done < <(
		while read -r _ _ _ _ line _; do
			line=$(printf '%b' "$line") # mountinfo escapes spaces as \040
			[[ $line == "$ENGINE_DIR"/* ]] && echo "$line"
		done </proc/self/mountinfo | sort -r
	)
	rm -f "$ENGINE_SOCK" "$ENGINE_DIR/dockerd.pid" "$ENGINE_DIR/containerd.pid" \
		"$containerd_sock" "$containerd_sock.ttrpc"
	if ((!found)) && [[ -z $quiet ]]; then
		log "no engine of ours is running in $ENGINE_DIR"
	fi
	return 0
}

cmd_stop() {
	[[ -d $ENGINE_DIR ]] || {
		log "no engine home at $ENGINE_DIR"
		return 0
	}
	if ((EUID != 0)); then
		if our_pid dockerd.pid >/dev/null || our_pid containerd.pid >/dev/null; then
			die "stopping the private engine in $ENGINE_DIR needs root"
		fi
		log "no engine of ours is running in $ENGINE_DIR"
		return 0
	fi
	lock
	stop_engine
}

cmd_env() {
	printf 'export MESHCTL_ENGINE_DIR=%q\n' "$ENGINE_DIR"
	printf 'export DOCKER_HOST=%q\n' "$ENGINE_HOST"
	printf 'export MESHCTL_TEST_DOCKER_HOST=%q\n' "$ENGINE_HOST"
}

cmd_status() {
	if engine_answers; then
		log "engine answers at $ENGINE_HOST (dockerd $(dk version --format '{{.Server.Version}}'), storage driver $(dk info --format '{{.Driver}}'))"
		return 0
	fi
	log "no engine answers at $ENGINE_HOST"
	return 1
}

(($# == 1)) || usage
check_engine_paths
[[ $pool =~ ^198\.1[89]\.[0-9]+\.[0-9]+/(1[5-9]|2[0-4])$ ]] ||
	die "MESHCTL_ENGINE_POOL=$pool: give a slice of 198.18.0.0/15, at most /24"
case $1 in
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
status) cmd_status ;;
-h | --help | help) usage 0 ;;
*) usage ;;
esac
