#!/usr/bin/env bash
# Every student-like kernel of the mistakes files through the tutor's own check on one
# GPU machine, in SHARDS processes at once (the compiles are CPU-bound; the GPU is idle
# most of a check).  Per-check seconds here are NOT latencies: the shards share the CPUs.
#   SHARDS=8 [ONLY_FILE=names.txt] DRILLS=04,05,06,07,08,09 LIMIT=360 OUT=/some/dir bash bench/gpu_mistakes.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
SHARDS=${SHARDS:-8}; DRILLS=${DRILLS:-04,05,06,07,08,09}; LIMIT=${LIMIT:-360}
ONLY=()  # ONLY_FILE: a file holding a comma-separated list of the kernels to check (names or parts)
if [ -n "${ONLY_FILE:-}" ]; then ONLY=(--only "$(cat "$ONLY_FILE")"); fi
for i in $(seq 0 $((SHARDS - 1))); do
    timeout "$LIMIT" python3 bench/check_all.py --mistakes --no-shipped --drills "$DRILLS" --shard "$i/$SHARDS" "${ONLY[@]}" \
        --json "$OUT/mistakes-$i.json" > "$OUT/mistakes-$i.log" 2>&1 &
done
wait
cat "$OUT"/mistakes-*.log | grep -E "expected" > "$OUT/mistakes-all.txt"
cat "$OUT"/mistakes-*.log > "$OUT/mistakes-logs.txt"
# the shards' files in one archive: a device call brings back a few files only
tar czf "$OUT/mistakes-shards.tgz" -C "$OUT" $(cd "$OUT" && ls mistakes-[0-9]*.json mistakes-[0-9]*.log) \
    && rm -f "$OUT"/mistakes-[0-9]*.json "$OUT"/mistakes-[0-9]*.log
echo "checked $(wc -l < "$OUT/mistakes-all.txt") kernels; not what they must: $(grep -c 'NOT what' "$OUT/mistakes-all.txt")"
grep "NOT what" "$OUT/mistakes-all.txt"
