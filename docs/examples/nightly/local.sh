#!/usr/bin/env bash
# The nightly workflow's steps on one machine: NIGHTS nights (default 7), each as two
# shards measured in parallel, merged into a throwaway PostgreSQL server; from the night
# SLOWDOWN_NIGHT on (default 5; 0 for none) the example suite's sqrt at 2^16 elements makes
# EXTRA_CALLS (default 3) whole extra calls. As in the workflow, the nights are measured
# with `--metric time,instructions` and judged on the counts (GATE_METRIC=instructions),
# which no neighbour moves: `regressions --metric instructions` raises exactly one alert,
# on that point, and tonight's comparison with the previous night finds nothing new; the
# times' own regressions are listed beside them as they are. Counting pays for importing
# torch under valgrind in every shard (about a minute of CPU each): RUN_ARGS="--threads 1"
# GATE_METRIC=time measures times alone, in seconds a shard.
#
#   local.sh [WORK_DIR]
#
# WORK_DIR (default: a new temporary directory) receives bundles/, dashboard/ and
# summary.md. Needs PostgreSQL's initdb and pg_ctl (on PATH or in
# /usr/lib/postgresql/*/bin); as root they run as the postgres (else nobody) account,
# since PostgreSQL refuses to run as root. The server listens on 127.0.0.1 only, trusts
# local connections, runs with fsync off (it is thrown away), and is stopped and deleted
# on exit. SUITE (default: suite.py beside this script), FILTER, RUN_ARGS and BENCHBENCH
# are passed to shard.sh and merge.sh; BENCHBENCH_MACHINE (default nightly-example) names
# the machine as the workflow does; GATE=1 makes a regression of tonight against the
# previous night exit 3 as in the workflow (a rehearsal reports by default).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)

pg_bin() {
    if command -v "$1" >/dev/null 2>&1; then command -v "$1"; return; fi
    for candidate in /usr/lib/postgresql/*/bin/"$1"; do
        if [ -x "$candidate" ]; then echo "$candidate"; return; fi
    done
    echo "local.sh: $1 not found on PATH or in /usr/lib/postgresql/*/bin: install PostgreSQL" >&2
    exit 1
}
initdb=$(pg_bin initdb)
pg_ctl=$(pg_bin pg_ctl)

pgroot=$(mktemp -d)
as_owner=()
if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id postgres >/dev/null 2>&1 || owner=nobody
    chown "$owner" "$pgroot"
    as_owner=(runuser -u "$owner" --)
fi
stop_server() {
    "${as_owner[@]}" "$pg_ctl" -D "$pgroot/data" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$pgroot"
}
trap stop_server EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as_owner[@]}" "$initdb" -D "$pgroot/data" -U postgres --auth=trust -E UTF8 --locale=C \
    --no-sync >/dev/null
"${as_owner[@]}" "$pg_ctl" -D "$pgroot/data" -l "$pgroot/server.log" -w -t 60 start \
    -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories=$pgroot -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    >/dev/null
export BENCHBENCH_STORE="postgresql://postgres@127.0.0.1:$port/postgres"

export SUITE=${SUITE:-$here/suite.py}
# One torch thread: on a shared machine, a parallel region waits for a descheduled thread.
export RUN_ARGS=${RUN_ARGS:---threads 1 --metric time,instructions}
export GATE_METRIC=${GATE_METRIC:-instructions}
export BENCHBENCH_MACHINE=${BENCHBENCH_MACHINE:-nightly-example}
nights=${NIGHTS:-7}
slowdown=${SLOWDOWN_NIGHT:-5}

# NIGHTS nights, the last one tonight, named by their dates.
tonight=$(date -u +%Y-%m-%d)
for ((i = nights; i >= 1; i--)); do
    night=$(date -u -d "$tonight - $((i - 1)) days" +%Y-%m-%d)
    number=$((nights - i + 1))
    extra=0
    if [ "$slowdown" -gt 0 ] && [ "$number" -ge "$slowdown" ]; then extra=${EXTRA_CALLS:-3}; fi
    EXTRA_CALLS=$extra "$here/shard.sh" "$night" 1/2 "$work/bundles" & first=$!
    EXTRA_CALLS=$extra "$here/shard.sh" "$night" 2/2 "$work/bundles" & second=$!
    wait "$first"
    wait "$second"
done

rm -f "$work/summary.md"
SUMMARY="$work/summary.md" DASHBOARD="$work/dashboard" "$here/merge.sh" "$tonight" "$work/bundles"
echo "local.sh: summary in $work/summary.md, dashboard in $work/dashboard/index.html"
