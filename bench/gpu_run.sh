#!/usr/bin/env bash
# One device call: versions, the tutor's check of every drill and solution, and
# the side-by-side speed table.  Everything lands in $OUT (or ./bench-out).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c 'import sys, torch, triton, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "triton", triton.__version__, "numpy", numpy.__version__)' | tee -a "$OUT/gpu.txt"
python3 bench/check_all.py --json "$OUT/check_all.json" 2>&1 | tee "$OUT/check_all.log" | tail -11
python3 bench/attention_speed.py ${SPEED_ARGS:-} --json "$OUT/speed.json" 2>&1 | tee "$OUT/speed.log" | tail -16
python3 bench/backward_speed.py --json "$OUT/backward.json" 2>&1 | tee "$OUT/backward.log" | tail -16
