"""How far a kernel's dV is from the lse-along-the-keys P model (attention_backward._candidate_p) at a shape:
run the fixture 04_lse_broadcast_along_the_keys_in_both_loops (materialised from the mistakes file) forward
and backward on random inputs and print the largest gap to the model, absolute and against matches()'s slack.
  python3 bench/lse_axis_fit.py [B H N D]"""
from __future__ import annotations

import importlib.util
import pathlib
import sys
import tempfile

import torch

from tutor.authoring import student_kernels
from tutor.harness.problems import attention_backward as ab


def main() -> None:
    b, h, n, d = (int(x) for x in sys.argv[1:5]) if len(sys.argv) >= 5 else (2, 8, 1000, 64)
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out = pathlib.Path(tempfile.mkdtemp())
    student_kernels.materialise(out)
    path = out / "04_lse_broadcast_along_the_keys_in_both_loops.py"
    spec = importlib.util.spec_from_file_location("fixture", path)
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    g = torch.Generator().manual_seed(1)
    q, k, v, do = (torch.randn((b, h, n, d), generator=g).half().to(dev) for _ in range(4))
    o, lse = m.attention_forward(q, k, v, causal=False)
    _, _, dv = m.attention_backward(q, k, v, o, lse, do, causal=False)
    s = (q.double() @ k.double().transpose(-1, -2)) * d**-0.5
    lse64 = torch.logsumexp(s, -1)
    p = torch.exp(s - ab._lse_along_keys(lse64, int(m.BLOCK_M)))
    for how, pp in (("P in float64", p), ("P rounded to fp16 (as the kernel's dot takes it)", p.half().double())):
        model = pp.transpose(-1, -2) @ do.double()
        gap = (dv.double() - model).abs()
        slack = 0.02 + 1e-2 * model.abs()
        print(f"shape {b}x{h}x{n}x{d} on {dev}, {how}: max |dV - model| {float(gap.max()):.4g}, max |dV|"
              f" {float(dv.abs().max()):.4g}, worst gap / slack {float((gap / slack).max()):.3g} (<= 1 fits),"
              f" max P {float(p.max()):.4g}")


if __name__ == "__main__":
    main()
