#!/usr/bin/env bash
# peers.sh: builds the tools scripts/bench compares meshctl with, from source, at pinned versions,
# through the Go module proxy; prints the path of each on stdout as NAME=PATH lines.
#
# usage: scripts/peers.sh            build what is missing (cached under $MESHCTL_PEERS_DIR,
#                                    default ~/.cache/meshctl/peers), print the paths
#                                    (and compose_version=VERSION)
#
# Docker Compose: `go install …@version` refuses it (its go.mod has exclude directives), so the
# module is downloaded at the pinned version and built in place, which is the same source.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/lib.sh"

readonly COMPOSE_MODULE=github.com/docker/compose/v5 COMPOSE_VERSION=v5.6.0
dir=${MESHCTL_PEERS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/meshctl/peers}
compose=$dir/docker-compose-$COMPOSE_VERSION

if [[ ! -x $compose ]]; then
	log "building Docker Compose $COMPOSE_VERSION from source (a few minutes, once)"
	mkdir -p "$dir"
	src=$(go mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" | jq -r .Dir)
	build=$(mktemp -d "${TMPDIR:-/tmp}/meshctl-compose.XXXXXX")
	trap 'rm -rf "$build"' EXIT
	cp -r "$src/." "$build"
	chmod -R u+w "$build"
	(cd "$build" && go build -trimpath -ldflags "-X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" -o "$compose.tmp" ./cmd)
	mv "$compose.tmp" "$compose"
fi
echo "compose=$compose"
echo "compose_version=$COMPOSE_VERSION"
