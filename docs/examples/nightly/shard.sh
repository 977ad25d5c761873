#!/usr/bin/env bash
# One shard of a nightly: measure shard I/N into a local SQLite store and export its run
# as a bundle the merge step imports.
#
#   shard.sh NIGHT I/N OUT_DIR
#
# NIGHT names the night (sortable: YYYY-MM-DD or YYYY-MM-DDTHHMM); the shards of one
# night share the run group "nightly-NIGHT", so `compare` and `show` take them as one run.
# Each shard's run is labelled "nightly-NIGHT-shard-I" (a label equal to the group value
# would make `compare nightly-NIGHT` pick that one shard instead of the group).
# Environment: SUITE (default quick), FILTER (a --filter regex, default none),
# RUN_ARGS (more `benchbench run` flags, e.g. "--budget 0.2"), BENCHBENCH (the command,
# default benchbench).
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: shard.sh NIGHT I/N OUT_DIR (e.g. shard.sh 2026-11-24 1/4 bundles)" >&2
    exit 2
fi
night=$1 shard=$2 out=$3
index=${shard%%/*}
bb() { ${BENCHBENCH:-benchbench} "$@"; }

mkdir -p "$out"
store="$out/shard-$night-$index.db"
filter=()
if [ -n "${FILTER:-}" ]; then filter=(--filter "$FILTER"); fi
# --shard-by count: every night splits the points the same way (each shard's store is
# new, so there is no history to balance by cost anyway).
# The run in the background and this shell waiting for it, so that a scheduler's SIGINT
# or SIGTERM to this shell is passed on to the run (a shell does not pass them to its
# foreground child): it stops after the current sample, its finished points kept. Where
# nothing follows the run, `exec benchbench run ...` does the same.
# (Not through the bb function: in the background that is a subshell, and the signal
# would stop the subshell, not the run.)
# shellcheck disable=SC2086  # RUN_ARGS is a list of flags; BENCHBENCH may be words
${BENCHBENCH:-benchbench} run "${SUITE:-quick}" "${filter[@]}" --kind nightly \
    --shard "$shard" --shard-by count --group "nightly-$night" \
    --label "nightly-$night-shard-$index" --store "$store" ${RUN_ARGS:-} &
run=$!
trap 'kill -INT "$run" 2>/dev/null || true' INT
trap 'kill -TERM "$run" 2>/dev/null || true' TERM
status=0
wait "$run" || status=$?
while kill -0 "$run" 2>/dev/null; do wait "$run" || status=$?; done  # a signal cut the wait
trap - INT TERM
# 142: stopped at RUN_ARGS' --deadline, before the job's time limit: the points measured
# are exported (the run is marked interrupted), so tonight keeps them.
if [ "$status" -ne 0 ] && [ "$status" -ne 142 ]; then exit "$status"; fi
bb export latest --store "$store" --format bundle -o "$out/bundle-$night-shard-$index.json.gz"
