"""Verdict and diagnosis seconds of failing saves (mistakes-file kernels) and the solution, per drill.

    python bench/failing_save_costs.py [--drills 05,06,07] [--seeds 0,1] [--json out.json]
        [--names 05:merge_natural_exp,kv_of_head_zero;07:no_alpha] [--files 08:/tmp/fx/08_x.py,09:/tmp/fx/09_y.py]

Each file goes through the tutor's own check (`run_check`, timing off) in this process, on the CPU
interpreter unless a GPU is visible; the costs are the check's own phase costs.  Run it on two trees
(a `git worktree` of the older one, this script copied into its bench/: it imports the tree it sits in) to
compare a change on failing saves as well as passing ones.  ``--files``: kernels written elsewhere (entries
the older tree's mistakes file lacks, materialised by the newer one), checked after the named ones.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tutor.authoring import student_kernels
from tutor.catalog import kernel_drills
from tutor.harness.check import run_check
from tutor.harness.device import select_device
from tutor.harness.job import CheckJob

DEFAULT = {"05": ["merge_natural_exp", "kv_of_head_zero", "split_acc_not_rescaled", "states_stored_slice_major"],
           "06": ["masked_scores_set_to_zero", "v_loaded_one_key_late"],
           "07": ["no_alpha", "merge_no_rescale", "v_from_k", "table_row_stride"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--drills", default="05,06,07")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--names", default="", help="DRILL:name,name;DRILL:name (default: a few per drill)")
    ap.add_argument("--files", default="", help="DRILL:path,DRILL:path (checked as that drill)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    names = dict(DEFAULT)
    for part in filter(None, args.names.split(";")):
        drill, listed = part.split(":")
        names[drill] = [n for n in listed.split(",") if n]  # "08:" checks none of the defaults
    root = Path(__file__).resolve().parents[1]
    device = select_device("auto")
    scratch = Path(tempfile.mkdtemp(prefix="flashtutor-costs-"))
    rows = []
    for drill in (d for d in kernel_drills() if d.id in args.drills.split(",")):
        entries = {m.name: m for m in student_kernels.load(drill)}
        files = []
        for name in names.get(drill.id, []):
            path = scratch / f"{drill.id}_{name}.py"
            path.write_text(entries[name].text(drill), encoding="utf-8")
            files.append((name, path))
        files += [(Path(path).stem, Path(path)) for spec in filter(None, args.files.split(","))
                  for owner, path in [spec.split(":", 1)] if owner == drill.id]
        files.append(("solution", root / "solutions" / drill.solution))
        for name, path in files:
            for seed in (int(s) for s in args.seeds.split(",")):
                result = run_check(CheckJob(drill.id, str(path), timing=False, seed=seed), device)
                verdict, diagnosis = result.costs.get("verdict"), result.costs.get("diagnosis")
                rows.append({"drill": drill.id, "file": name, "seed": seed, "passed": result.passed,
                             "verdict_s": verdict.seconds if verdict else None,
                             "diagnosis_s": diagnosis.seconds if diagnosis else None})
                print(f"{drill.id} {name:32s} seed {seed} {'PASSED' if result.passed else 'FAILED'}"
                      f" verdict {rows[-1]['verdict_s']:.2f} s"
                      + (f" diagnosis {rows[-1]['diagnosis_s']:.2f} s" if rows[-1]["diagnosis_s"] else ""), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
