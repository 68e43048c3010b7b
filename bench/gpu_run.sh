#!/usr/bin/env bash
# One device call: versions, doctor, the tutor's own check of every drill (and, with
# STEPS including "mistakes", of every student-like kernel), and the speed tables.
#   STEPS="versions doctor check backward decode window" OUT=/some/dir bash bench/gpu_run.sh
# (other steps: dk32: drill 04's 32-row dK/dV kernels; fastbackward: the fast backward's every config;
#  mistakes, speed, loop, perf: the performance phase's split and rep lengths, gputests;
#  first, phases, concurrent: the first report, every phase per drill, checks at once)
# Each step's log goes to $OUT/logs.tgz; the summary (one line per step, then the
# tables) to stdout and $OUT/summary.txt.  On a bare GPU image, wheels carried in
# .whl/ (textual, watchdog, shtab, packaging...) are installed into /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-bench-out}; LOGS=/tmp/flashtutor-logs; mkdir -p "$OUT" "$LOGS"
STEPS=${STEPS:-"versions doctor check backward decode window"}
SUMMARY=$OUT/summary.txt; : > "$SUMMARY"

step() {  # step NAME SECONDS COMMAND...: run it with a limit, keep its log, say how it ended
    local name=$1 limit=$2; shift 2
    local start=$SECONDS
    timeout "$limit" "$@" > "$LOGS/$name.log" 2>&1
    local rc=$?
    echo "== $name: rc=$rc in $((SECONDS - start)) s" | tee -a "$SUMMARY"
}

for s in $STEPS; do
    case $s in
        versions) step versions 60 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
                  python3 -c "import sys, torch, triton, numpy; print(\"python\", sys.version.split()[0], \"torch\", torch.__version__, \"triton\", triton.__version__, \"numpy\", numpy.__version__)"'
                  cat "$LOGS/versions.log" | tee -a "$SUMMARY" ;;
        doctor)   step doctor 180 python3 -m tutor doctor; tail -12 "$LOGS/doctor.log" | tee -a "$SUMMARY" ;;
        check)    step check 400 python3 bench/check_all.py --json "$LOGS/check_all.json"; tail -16 "$LOGS/check.log" | tee -a "$SUMMARY" ;;
        mistakes) step mistakes ${MISTAKES_LIMIT:-540} python3 bench/check_all.py --mistakes --no-shipped ${MISTAKE_DRILLS:+--drills $MISTAKE_DRILLS} --json "$LOGS/mistakes.json"; grep -E "expected|files got" "$LOGS/mistakes.log" | tail -30 | tee -a "$SUMMARY" ;;
        speed)    step speed 400 python3 bench/attention_speed.py ${SPEED_ARGS:---kernels fast --quick} --json "$LOGS/speed.json"; tail -12 "$LOGS/speed.log" | tee -a "$SUMMARY" ;;
        backward) step backward 300 python3 bench/backward_speed.py; tail -14 "$LOGS/backward.log" | tee -a "$SUMMARY" ;;
        dk32)     step dk32 ${DK32_LIMIT:-150} python3 bench/drill04_dk32.py; tail -60 "$LOGS/dk32.log" | tee -a "$SUMMARY" ;;
        fastbackward) step fastbackward ${FAST_LIMIT:-240} python3 bench/backward_speed.py --kernels fast --all-configs --no-check ${FAST_SEQS:+--seqs $FAST_SEQS} --json "$LOGS/fastbackward.json"
                  tail -40 "$LOGS/fastbackward.log" | tee -a "$SUMMARY" ;;
        decode)   step decode 300 python3 bench/decode_speed.py; tail -30 "$LOGS/decode.log" | tee -a "$SUMMARY" ;;
        newdrills) for b in paged_decode_speed varlen_speed block_sparse_speed; do
                      step "$b" ${NEW_DRILL_LIMIT:-150} python3 bench/$b.py; tail -24 "$LOGS/$b.log" | tee -a "$SUMMARY"
                  done ;;
        decodefast) step decodefast 300 python3 bench/decode_speed.py --solution solutions/05_split_kv_decode_fast.py --splits ${FAST_SPLITS:-4,8,16,32} --json "$LOGS/decodefast.json"
                  tail -30 "$LOGS/decodefast.log" | tee -a "$SUMMARY" ;;
        window)   step window 300 python3 bench/sliding_window_speed.py; tail -16 "$LOGS/window.log" | tee -a "$SUMMARY" ;;
        windowfast) step windowfast ${WINDOW_FAST_LIMIT:-300} python3 bench/sliding_window_speed.py --kernels clear,fast --all-configs
                  tail -40 "$LOGS/windowfast.log" | tee -a "$SUMMARY" ;;
        perf)     step perf 420 bash -c 'python3 bench/profile_performance.py --passes 3 --repeats 5
                  python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 1
                  python3 bench/save_to_verdict.py --device gpu --saves 5 --cold-saves 0'
                  grep -E "^(timing inputs|pass |[0-9]+ +(solved|failed)|rep ms| +[0-9]+ (full|causal)|warm|cold|compiles:|save-to-verdict,)" "$LOGS/perf.log" | tee -a "$SUMMARY" ;;
        profile)  step profile 200 python3 bench/profile_diagnosis.py --device gpu --per-drill ${PROFILE_PER_DRILL:-2} --top 10 ${PROFILE_ARGS:-}
                  tail -14 "$LOGS/profile.log" | tee -a "$SUMMARY" ;;
        first)    step first 200 python3 bench/first_report.py --device gpu --runs 2; tail -5 "$LOGS/first.log" | tee -a "$SUMMARY" ;;
        phases)   for d in ${PHASE_DRILLS:-01 02 04 05 06}; do
                      step "phases$d" 150 python3 bench/save_to_verdict.py --device gpu --drill "$d" --saves ${PHASE_SAVES:-6} --cold-saves 0 --edit ${PHASE_EDIT:-source} ${PHASE_ARGS:-} --json "$LOGS/phases$d.json"
                      grep -E "^(warm|cold) |failing save|save-to-verdict," "$LOGS/phases$d.log" | tee -a "$SUMMARY"
                  done ;;
        concurrent) step concurrent 330 python3 bench/concurrent_checks.py --device gpu --counts ${CONCURRENT_COUNTS:-1 4 8} --json "$LOGS/concurrent.json"
                  tail -6 "$LOGS/concurrent.log" | tee -a "$SUMMARY" ;;
        gputests) step gputests 240 python3 -m pytest -q -p no:cacheprovider tests/test_roofline_gpu.py tests/test_parallel_compile_gpu.py tests/test_warmup.py
                  tail -4 "$LOGS/gputests.log" | tee -a "$SUMMARY" ;;
        loop)     step loop 470 env OUT="$LOGS/loop" bash bench/gpu_loop.sh; tail -30 "$LOGS/loop.log" | tee -a "$SUMMARY" ;;
        *) echo "unknown step $s" | tee -a "$SUMMARY" ;;
    esac
done
tar czf "$OUT/logs.tgz" -C "$LOGS" .
