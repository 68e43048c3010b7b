#!/usr/bin/env bash
# One device call that does what the card allows: on an H200, issue 20's save loop (the table its targets are
# set on) on PHASE_DRILLS; on any GPU, the fixtures bench/gpu_pending_fixtures.txt lists and the full messages
# of NAMES at seed 1.  OUT as bench/gpu_run.sh.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "gpu: $gpu" | tee "$OUT/gpu.txt"
if [[ "$gpu" == *H200* ]]; then
    OUT="$OUT/loop" STEPS="versions phases" PHASE_DRILLS="${PHASE_DRILLS:-01 04 06 07 09}" PHASE_SAVES=6 \
        bash bench/gpu_run.sh | tail -40
fi
if [ -s bench/gpu_pending_fixtures.txt ]; then
    ONLY_FILE=bench/gpu_pending_fixtures.txt SHARDS=2 DRILLS=${PENDING_DRILLS:-04} LIMIT=150 OUT="$OUT/pending" \
        bash bench/gpu_mistakes.sh | tail -5
fi
if [ -n "${NAMES:-}" ]; then
    NAMES="$NAMES" SEEDS=1 OUT="$OUT/one" bash bench/one_gpu_check.sh | tail -3
    grep -h "lse broadcast along the keys" "$OUT"/one/* | head -2 | cut -c1-300
fi
