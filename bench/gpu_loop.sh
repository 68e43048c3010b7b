#!/usr/bin/env bash
# One device call for the loop's numbers (issue 11): variants per phase, where a cold
# check's seconds go, save-to-verdict with source edits (both phases, warm and cold;
# compiles concurrent (the default), then one after another, then without the spare
# worker starting during a check), the roofline's sanity test and the parallel-compile
# parity test.  Everything lands in $OUT (or ./bench-out).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=${PYTHONPATH:-$PWD} PYTHONUNBUFFERED=1
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import sys, torch, triton; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__)' | tee -a "$OUT/gpu.txt"
python3 bench/compile_variants.py --device gpu 2>&1 | tee "$OUT/compile_variants.log" | tail -4
python3 bench/cold_check.py --device gpu --runs 2 2>&1 | tee "$OUT/cold_check.log" | tail -4
python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 2 --json "$OUT/save_to_verdict.json" 2>&1 \
    | tee "$OUT/save_to_verdict.log" | tail -5
FLASHTUTOR_PARALLEL_COMPILE=0 python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 0 \
    --json "$OUT/save_to_verdict_serial.json" 2>&1 | tee "$OUT/save_to_verdict_serial.log" | tail -4
python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 0 \
    --json "$OUT/save_to_verdict_nospare.json" 2>&1 | tee "$OUT/save_to_verdict_nospare.log" | tail -4
python3 -m pytest -q -s -p no:cacheprovider tests/test_roofline_gpu.py tests/test_parallel_compile_gpu.py 2>&1 \
    | tee "$OUT/gpu_tests.log" | tail -8
