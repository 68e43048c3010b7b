#!/usr/bin/env bash
# A few mistakes-file kernels through the tutor's own check on one GPU machine, each one's
# codes and diagnosis messages printed (gpu_mistakes.sh prints only the codes):
#   ONLY=name1,name2 DRILLS=04,07 OUT=/some/dir bash bench/gpu_fixture_messages.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
python3 bench/check_all.py --mistakes --no-shipped --drills "${DRILLS:-01,02,04,05,06,07,08,09}" --only "$ONLY" \
    --json "$OUT/r.json" > "$OUT/r.log" 2>&1
grep -E "expected" "$OUT/r.log"
python3 - "$OUT/r.json" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
for r in data if isinstance(data, list) else list(data.values()):
    if isinstance(r, dict) and r.get("file"):
        phase = r.get("diagnosis_phase") or {}
        print(r["file"].split("/")[-1], phase.get("status"), phase.get("reason", "")[:200])
        for d in r.get("diagnosis", []):
            print("   ", d["code"], ":", d["message"][:700])
PY
