#!/usr/bin/env bash
# The merge step of a nightly: import every bundle into the shared store, compare tonight
# with the previous night, run `regressions`, build the dashboard and write the summary.
#
#   merge.sh NIGHT BUNDLE_DIR...
#
# BUNDLE_DIR holds bundle-NIGHT-shard-I.json.gz files: tonight's, and earlier nights'
# (the history; importing a bundle twice changes nothing). The previous night is the
# latest NIGHT before tonight among the bundles' names.
# Environment: BENCHBENCH_STORE (the store, e.g. postgresql://...), SUMMARY (the markdown
# summary file, default $GITHUB_STEP_SUMMARY), DASHBOARD (default dashboard),
# GATE=1 to exit 3 when tonight regressed against the previous night (after writing
# everything), GATE_METRIC (time, the default, or instructions: gate only on instruction
# counts, which a shared runner's neighbours cannot blur, and list the history's
# regressions of the counts first, then those of the times as they are),
# BENCHBENCH (the command, default benchbench).
set -euo pipefail

if [ $# -lt 2 ]; then
    echo "usage: merge.sh NIGHT BUNDLE_DIR... (e.g. merge.sh 2026-11-24 tonight history)" >&2
    exit 2
fi
night=$1
shift
summary=${SUMMARY:-${GITHUB_STEP_SUMMARY:?set SUMMARY or GITHUB_STEP_SUMMARY}}
dashboard=${DASHBOARD:-dashboard}
bb() { ${BENCHBENCH:-benchbench} "$@"; }

bundles=()
for dir in "$@"; do
    for file in "$dir"/bundle-*.json.gz; do
        if [ -e "$file" ]; then bundles+=("$file"); fi
    done
done
if [ ${#bundles[@]} -eq 0 ]; then
    echo "merge.sh: no bundle-*.json.gz in $*" >&2
    exit 1
fi
bb import "${bundles[@]}"

# Nights are sortable names: the previous night is the last one before tonight.
previous=$(printf '%s\n' "${bundles[@]##*/}" | sed -E 's/^bundle-(.*)-shard-[0-9]+\.json\.gz$/\1/' \
    | sort -u | awk -v night="$night" '$0 < night' | tail -n 1)

status=0
{
    echo "## Nightly benchmarks: nightly-$night"
    echo
    if [ -n "$previous" ]; then
        echo "### nightly-$night compared with nightly-$previous"
        echo
        bb compare "nightly-$previous" "nightly-$night" --format markdown --no-fail-on-regression
        echo
    else
        echo "No earlier night to compare with: nightly-$night is the first."
        echo
    fi
    echo "### Regressions over the history"
    echo
    if [ "${GATE_METRIC:-time}" = instructions ]; then
        # The alerts come from the gate's metric, which no neighbour moves; the times'
        # own history is shown beside it as it is (a shared runner's drift and all). An
        # alert is one per point and first bad run: a step the counts and the times both
        # show is listed once, under the counts, which judge it first.
        echo "#### Instruction counts"
        echo
        bb regressions --metric instructions --format markdown
        echo
        echo "#### Times"
        echo
    fi
    bb regressions --format markdown
} >> "$summary"
if [ -n "$previous" ]; then
    if [ "${GATE_METRIC:-time}" = instructions ]; then
        # Exit 3 when a point's instruction count rose beyond compare's minimum effect.
        bb compare "nightly-$previous" "nightly-$night" --format json --no-fail-on-regression \
            | python3 -c 'import json, sys
slower = [p for p in json.load(sys.stdin)["points"] if p.get("instructions_mark") == "slower"]
sys.exit(3 if slower else 0)' || status=$?
    else
        bb compare "nightly-$previous" "nightly-$night" --format json >/dev/null || status=$?
    fi
fi
# regressions ran above and stored its verdicts: the build reads them back, judges nothing again
bb dashboard build -o "$dashboard"

if [ "$status" -eq 3 ] && [ "${GATE:-0}" = 1 ]; then
    echo "merge.sh: nightly-$night regressed against nightly-$previous (see the summary)" >&2
    exit 3
fi
if [ "$status" -ne 0 ] && [ "$status" -ne 3 ]; then
    exit "$status"
fi
