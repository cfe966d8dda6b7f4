#!/usr/bin/env bash
# ledger.sh: `meshctl build record` latency, end to end (a meshctl process, its request not timed),
# on a 3-member etcd on 127.0.0.1 (scripts/etcd.sh) beside the file ledger; then the same record
# in-process (go test -bench BenchmarkRecordStore ./pkg/ledger). The etcd figure is one
# transaction that compares what it read, replicated to a quorum before it returns; the file
# figure is the ledger lock and three fsynced writes. No target: the row puts the two side by side.
#
# Run by scripts/bench (MESHCTL_BENCH_BIN, MESHCTL_BENCH_WORK, MESHCTL_BENCH_ROWS); standalone, it
# builds meshctl itself. It uses the cluster scripts/etcd.sh env names if one answers, else starts
# one and stops it at the end. MESHCTL_BENCH_RUNS: records per store (default 20).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/lib.sh
. "$here/../lib.sh"
export LC_ALL=C
runs=${MESHCTL_BENCH_RUNS:-20}

work=${MESHCTL_BENCH_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/meshctl-bench-ledger.XXXXXX")}
state=$work/state
etcd_started=0
cleanup() {
	local rc=$?
	((etcd_started)) && "$here/../etcd.sh" stop
	rm -rf "$state"
	exit "$rc"
}
trap cleanup EXIT

meshctl=${MESHCTL_BENCH_BIN:-}
if [[ -z $meshctl ]]; then
	release_build "$here/../.." "$work/meshctl"
	meshctl=$work/meshctl
fi
if ! "$here/../etcd.sh" status 2>/dev/null; then
	etcd_started=1
	"$here/../etcd.sh" start
fi
eval "$("$here/../etcd.sh" env)"

# record_ms LEDGER: the median ms of $runs `build record` processes.
record_ms() {
	local i id t0 t1
	for ((i = 0; i < runs; i++)); do
		id=$("$meshctl" --state-dir "$state" --ledger "$1" build request app | awk '$1 == "app" {print $2}')
		t0=$EPOCHREALTIME
		"$meshctl" --state-dir "$state" --ledger "$1" build record "$id" \
			--image "reg.example/app@sha256:$(printf '%064d' "$i")" >/dev/null
		t1=$EPOCHREALTIME
		awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", (b - a) * 1000 }'
	done | median
}

file_ms=$(record_ms file)
etcd_ms=$(record_ms "etcd://$MESHCTL_TEST_ETCD/meshctl-bench-$$")
echo "build record (meshctl process), median of $runs: file ledger ${file_ms} ms, etcd (3 members) ${etcd_ms} ms"
bench_row "build record, etcd ledger (process)" "$etcd_ms" "build record, file ledger" "$file_ms" ms - >/dev/null

go test -run '^$' -bench BenchmarkRecordStore -benchtime "${runs}x" "$here/../../pkg/ledger" | tee "$work/gobench.txt"
ns() { awk -v n="BenchmarkRecordStore/$1-" 'index($1, n) == 1 { printf "%.2f", $3 / 1e6; exit }' "$work/gobench.txt"; }
bench_row "build record, etcd ledger (in-process)" "$(ns etcd)" "build record, file ledger" "$(ns file)" ms - >/dev/null
