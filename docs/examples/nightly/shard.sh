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
# shellcheck disable=SC2086  # RUN_ARGS is a list of flags
bb run "${SUITE:-quick}" "${filter[@]}" --kind nightly --shard "$shard" --shard-by count \
    --group "nightly-$night" --label "nightly-$night-shard-$index" --store "$store" \
    ${RUN_ARGS:-}
bb export latest --store "$store" --format bundle -o "$out/bundle-$night-shard-$index.json.gz"
