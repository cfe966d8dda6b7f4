#!/usr/bin/env bash
# mesh.sh: 100 hosts in one process (100 state directories driving pkg/cli, each over its own fake
# engine whose stops take a fixed down time) against the real etcd cluster (scripts/etcd.sh).
# They apply one stop-first change at once under max-unavailable 10; the row gives the total
# against its floor, 10 waves of the down time, and the most hosts down at once (never over 10:
# the benchmark fails if it is). Then they run one mesh: all window at once, whose step does
# nothing: the rows give its total (gathering to every close), the time to the last join and to
# the step's start. "stopped" holds each host's container stopped, which takes a slot of
# max-unavailable 100; "changed" holds it changed, which takes none. The benchmark fails unless
# every window exits 0 and the step ran once.
#
# Run by scripts/bench (MESHCTL_BENCH_ROWS); standalone too. It uses the cluster scripts/etcd.sh
# env names if one answers, else starts one and stops it at the end.
#   MESHCTL_BENCH_HOSTS  hosts (default 100)   MESHCTL_BENCH_DOWN  down time per recreate (200ms)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"
export LC_ALL=C
work=$(mktemp -d "${TMPDIR:-/tmp}/meshctl-bench-mesh.XXXXXX")
etcd_started=0
cleanup() {
	local rc=$?
	((etcd_started)) && "$here/../etcd.sh" stop
	rm -rf "$work"
	exit "$rc"
}
trap cleanup EXIT
if ! "$here/../etcd.sh" status 2>/dev/null; then
	etcd_started=1
	"$here/../etcd.sh" start
fi
eval "$("$here/../etcd.sh" env)"

hosts=${MESHCTL_BENCH_HOSTS:-100}
down=${MESHCTL_BENCH_DOWN:-200ms}
go test -run '^$' -bench 'BenchmarkMesh' -benchtime 3x "$here/../../pkg/cli" | tee "$work/gobench.txt"
metric() { awk -v n="$1-" -v u="$2" 'index($1, n) == 1 { for (i = 3; i < NF; i++) if ($(i + 1) == u) { print $i; exit } }' "$work/gobench.txt"; }
worst=$(metric BenchmarkMeshBudgetHundredHosts s-worst)
most=$(metric BenchmarkMeshBudgetHundredHosts most-down)
floor=$(awk -v w="$worst" -v x="$(metric BenchmarkMeshBudgetHundredHosts x-floor)" 'BEGIN { printf "%.2f", w / x }')
echo "$hosts hosts under max-unavailable 10, $down down each: worst of 3 runs ${worst} s, floor ${floor} s, at most $most down at once"
bench_row "$hosts hosts apply, max-unavailable 10" "$worst" "floor: 10 waves of $down" "$floor" s - >/dev/null
bench_row "  most hosts down at once" "$most" "max-unavailable" 10 hosts 1 >/dev/null
win() { metric "BenchmarkMeshWindowHundredHosts/$1" "s-$2"; }
sw=$(win stopped worst) sj=$(win stopped joined) ss=$(win stopped started)
cw=$(win changed worst) cj=$(win changed joined) cs=$(win changed started)
echo "$hosts hosts, one mesh window, worst of 3 runs: held stopped ${sw} s (last join ${sj} s, start ${ss} s); held changed ${cw} s (last join ${cj} s, start ${cs} s)"
bench_row "$hosts hosts mesh window, held stopped" "$sw" "held changed: no slots" "$cw" s - >/dev/null
bench_row "  to the last join" "$sj" "held changed" "$cj" s - >/dev/null
bench_row "  to the step's start" "$ss" "held changed" "$cs" s - >/dev/null
