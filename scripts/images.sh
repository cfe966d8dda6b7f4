#!/usr/bin/env bash
# images.sh: build the images meshctl's tests run, offline, from Debian packages, into the test
# engine at $MESHCTL_TEST_DOCKER_HOST (default: the private engine of scripts/engine.sh).
#
# usage: scripts/images.sh [--force]
#
#   meshtest/busybox:1   busybox-static: /bin/busybox and its applets, CMD ["/bin/sh"]
#   meshtest/registry:1  docker-registry: /bin/registry with the libc it links, serving
#                        /var/lib/registry on 127.0.0.1:5000 (config /etc/docker/registry/config.yml)
#
# An image that already exists is kept; --force rebuilds both.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

readonly PATH_ENV=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# A fixed mtime and file order give the same layer digest on every machine.
readonly MTIME=@1704067200

force=0
case ${1:-} in
"") ;;
-f | --force) force=1 ;;
*)
	sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}" >&2
	exit 2
	;;
esac

check_engine_paths
engine_answers || die "no engine answers at $ENGINE_HOST; run scripts/engine.sh start"

work=$(mktemp -d "${TMPDIR:-/tmp}/meshctl-images.XXXXXX")
trap 'rm -rf "$work"' EXIT

# want is true when the image must be built.
want() {
	((force)) && return 0
	if dk image inspect "$1" >/dev/null 2>&1; then
		log "$1 exists"
		return 1
	fi
}

# fetch extracts Debian packages into $work/<package>, downloading them with one apt-get call
# (apt's start-up costs a second), and updating the package lists once if the download fails
# (empty lists on a fresh machine).
fetch() {
	local opts=(-q) pkg debs
	# As root, apt would hand the download to the _apt user, who cannot write to our 0700 dir.
	((EUID == 0)) && opts+=(-o APT::Sandbox::User=root)
	mkdir -p "$work/deb"
	if ! (cd "$work/deb" && apt-get download "${opts[@]}" "$@") >"$work/apt.log" 2>&1; then
		((EUID == 0)) || die "apt-get download $* failed: $(cat "$work/apt.log")"
		log "apt-get download $* failed; updating the package lists"
		apt-get update -q >"$work/apt.log" 2>&1 || die "apt-get update failed: $(cat "$work/apt.log")"
		(cd "$work/deb" && apt-get download "${opts[@]}" "$@") >"$work/apt.log" 2>&1 ||
			die "apt-get download $* failed: $(cat "$work/apt.log")"
	fi
	for pkg; do
		debs=("$work/deb/${pkg}_"*.deb)
		dpkg-deb -x "${debs[0]}" "$work/$pkg"
	done
}

# import turns a root filesystem into an image owned by root, with Dockerfile-style changes.
import() {
	local root=$1 ref=$2 change args=()
	shift 2
	for change; do args+=(--change "$change"); done
	tar -C "$root" -c --numeric-owner --owner=0 --group=0 --sort=name --mtime="$MTIME" . |
		dk import "${args[@]}" --message "meshctl test image, built by scripts/images.sh" - "$ref" >/dev/null
	log "built $ref"
}

build_busybox() {
	local ref=meshtest/busybox:1 root=$work/busybox-root
	mkdir -p "$root"/{bin,dev,etc,proc,root,sys,tmp}
	chmod 1777 "$root/tmp"
	chmod 0700 "$root/root"
	install -m 0755 "$work/busybox-static/bin/busybox" "$root/bin/busybox"
	# One process for the ~270 links: a fork per ln costs seconds. perl-base is Essential in Debian.
	(cd "$root/bin" && ./busybox --list | grep -vx busybox |
		perl -ne 'chomp; symlink("busybox", $_) or die "symlink $_: $!\n"')
	cat >"$root/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
EOF
	cat >"$root/etc/group" <<'EOF'
root:x:0:
nogroup:x:65534:
EOF
	import "$root" "$ref" "ENV $PATH_ENV" 'CMD ["/bin/sh"]'
}

build_registry() {
	local ref=meshtest/registry:1 root=$work/registry-root bin line lib libs
	mkdir -p "$root"/{bin,dev,etc/docker/registry,proc,sys,tmp,var/lib/registry}
	chmod 1777 "$root/tmp"
	bin=$root/bin/registry
	install -m 0755 "$work/docker-registry/usr/bin/docker-registry" "$bin"
	# Debian builds it with cgo: copy the libraries and loader ldd names, as real files, to the
	# same paths. A static binary needs nothing.
	libs=$(ldd "$bin" 2>&1) || [[ $libs == *"not a dynamic executable"* ]] || die "ldd $bin: $libs"
	while read -r line; do
		case $line in
		*"=> /"*) lib=${line#*=> } ;;
		/*) lib=$line ;;
		*) continue ;; # linux-vdso, "statically linked"
		esac
		lib=${lib%% (*}
		mkdir -p "$root${lib%/*}"
		cp -L "$lib" "$root$lib"
	done <<<"$libs"
	cat >"$root/etc/docker/registry/config.yml" <<'EOF'
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: /var/lib/registry
  delete:
    enabled: true
http:
  addr: 127.0.0.1:5000
EOF
	import "$root" "$ref" "ENV $PATH_ENV" 'ENTRYPOINT ["/bin/registry"]' \
		'CMD ["serve","/etc/docker/registry/config.yml"]'
}

pkgs=() builds=()
if want meshtest/busybox:1; then
	pkgs+=(busybox-static)
	builds+=(build_busybox)
fi
if want meshtest/registry:1; then
	pkgs+=(docker-registry)
	builds+=(build_registry)
fi
((${#pkgs[@]})) || exit 0
fetch "${pkgs[@]}"
for build in "${builds[@]}"; do
	"$build"
done
