#!/usr/bin/env bash
# One student-like kernel of a mistakes file through the tutor's own check on a GPU,
# with several seeds, every diagnosis message printed in full (what gpu_mistakes.sh's
# summary leaves out).   NAMES="04_lse_by_key_in_dkdv" SEEDS="1 2 3" bash bench/one_gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
source bench/gpu_env.sh
OUT=${OUT:-bench-out}; mkdir -p "$OUT"
FX=/tmp/flashtutor-one-fx; rm -rf "$FX"
python3 -c "import pathlib; from tutor.authoring import student_kernels as m; m.materialise(pathlib.Path('$FX'))"
for name in $NAMES; do
    for s in ${SEEDS:-1 2 3}; do
        timeout 120 python3 -m tutor check "$FX/$name.py" --drill "${name:0:2}" --no-timing --json --seed "$s" > "$OUT/$name-$s.json" 2> "$OUT/$name-$s.err"
        python3 - "$OUT/$name-$s.json" "$name" "$s" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read() or "{}")
print(f"== {sys.argv[2]} seed {sys.argv[3]}: {d.get('outcome')} codes {[x['code'] for x in d.get('diagnosis', [])]}")
for c in d.get("cases", []):
    print(f"   {c['name']:8} causal={c['causal']} {c['shape']} err={c['max_abs_err']} passed={c['passed']}")
for x in d.get("diagnosis", []):
    print("  ", x["code"], ":", x["message"][-1500:])
PY
    done
done
