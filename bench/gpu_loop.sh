#!/usr/bin/env bash
# One device call for the loop's numbers (issue 11): variants per phase, where a cold
# check's seconds go, save-to-verdict with source edits (both phases, warm and cold),
# and the roofline's sanity test.  Everything lands in $OUT (or ./bench-out).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/gpu.txt"
python3 bench/compile_variants.py --device gpu 2>&1 | tee "$OUT/compile_variants.log" | tail -4
python3 bench/cold_check.py --device gpu --runs 2 2>&1 | tee "$OUT/cold_check.log" | tail -4
python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 2 --json "$OUT/save_to_verdict.json" 2>&1 \
    | tee "$OUT/save_to_verdict.log" | tail -5
python3 -m pytest -q -s tests/test_roofline_gpu.py 2>&1 | tee "$OUT/roofline_gpu.log" | tail -6
# the same warm saves with the performance phase's compiles run concurrently (opt-in until measured)
FLASHTUTOR_PARALLEL_COMPILE=1 python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 0 \
    --json "$OUT/save_to_verdict_parallel.json" 2>&1 | tee "$OUT/save_to_verdict_parallel.log" | tail -4
