"""How well attention on fp16-rounded scores fits a kernel's hostile-case output (the model
:func:`tutor.harness.problems.attention.hostile.rounded_scores_words` says), per scale where the
rounding may sit: rows wrong against the truth, rows off the model, largest errors.
    python3 bench/fp16_score_model.py FILE.py [--shape 2,8,1000,64] [--seeds 0,1]"""

from __future__ import annotations

import argparse
import importlib.util

import torch

from tutor.harness import launch as launching
from tutor.harness.numerics import LOG2E
from tutor.harness.problems.attention import hostile as h
from tutor.harness.problems.attention.reference import attention_reference


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--shape", default="2,8,1000,64")
    ap.add_argument("--seeds", default="0,1")
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("student", args.file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    shape = tuple(int(x) for x in args.shape.split(","))
    for seed in (int(s) for s in args.seeds.split(",")):
        q, k, v = h.hostile_inputs(shape, device, torch.Generator().manual_seed(seed))
        out = launching.run_launcher(module, (q, k, v), None, record_visits=True).out
        truth = h.row_errors(out, attention_reference(q, k, v, causal=False), per_head=True)
        s = h.scores(q, k, False)
        for name, scale in (("log2", LOG2E), ("natural", 1.0), ("raw", q.shape[-1] ** 0.5)):
            model = torch.softmax((s * scale).half().double() / scale, dim=-1) @ v.double()
            off = h.row_errors(out, model, per_head=True)
            print(f"seed {seed} {name:8} wrong {int((truth > 0.02).sum()):5d} (max {float(truth.max()):.3g})"
                  f"  off the model {int((off > 0.02).sum()):5d} (max {float(off.max()):.3g})", flush=True)


if __name__ == "__main__":
    main()
