"""Is drill 04's 32-row dK/dV loop wrong at (1,2,1024,128) full on this GPU, and does it
depend on the compiler's pipelining (num_stages) or warps?  Prints one line per variant.

    python3 bench/drill04_dk32.py     # a GPU; run 17 call 4: docs/benchmarks/h200-run17/call4/dk32.log

Two correct student-like kernels (04_blocks_32_by_64, 04_dkdv_steps_32_query_rows) FAILED the
tutor's check on an H200 twice (the whole case, full mode, dK off by 0.07-0.1); here, with
seed 0, plain tensors and no visit recording, each variant is right to 1.4e-4.  What differs
from the check is left to find (the check's random inputs, its poisoned output buffers, the
visit store inside the loop): each variant now also runs through the check's own
``run_backward`` (guard bands, poisoned outputs, visit maps) on the same inputs, beside the
plain call (not yet run on a GPU).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import tempfile
from types import ModuleType

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from tutor.authoring.student_kernels import materialise
from tutor.harness.problems import attention_backward as backward

SHAPE = (1, 2, 1024, 128)
LAUNCH = "CAUSAL=causal, RECORD_VISITS=dkdv_visits is not None,"  # the dK/dV launch's last line


def load(path: pathlib.Path, extra: str, folder: pathlib.Path) -> ModuleType:
    """The file as a module, its dK/dV launch given ``extra`` (e.g. "num_stages=1")."""
    src = path.read_text()
    if extra:
        src = src.replace(LAUNCH, f"{LAUNCH} {extra},", 1)
    file = folder / f"x_{abs(hash((str(path), extra)))}.py"
    file.write_text(src)
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    folder = pathlib.Path(tempfile.mkdtemp(prefix="dk32-"))
    written = materialise(folder)
    q, k, v, do = backward.random_case(SHAPE, "cuda", torch.Generator().manual_seed(0))
    solution = pathlib.Path(__file__).resolve().parent.parent / "solutions" / "04_flash_backward_solution.py"
    for name in ("04_blocks_32_by_64", "04_dkdv_steps_32_query_rows", "solution"):
        path = solution if name == "solution" else written[name]
        for extra in ("", "num_stages=1", "num_stages=2", "num_warps=8"):
            for causal in (False, True):
                module = load(path, extra, folder)
                o, lse = module.attention_forward(q, k, v, causal)
                ref = backward.reference(q, k, v, do, causal)
                # plain tensors, no visit maps; then the check's own launch (guard bands, poisoned
                # outputs, visit maps recorded inside the loops): run 17 call 4 ran only the first
                grads = dict(zip(("dq", "dk", "dv"), module.attention_backward(q, k, v, o, lse, do, causal),
                                 strict=True))
                # plain tensors with visit maps: the variant that records visits, nothing else changed
                n_m, n_n = -(-SHAPE[2] // int(module.BLOCK_M)), -(-SHAPE[2] // int(getattr(module, "BLOCK_N",
                                                                                          module.BLOCK_M)))
                bh = SHAPE[0] * SHAPE[1]
                maps = (torch.zeros((bh, n_n, n_m), dtype=torch.int32, device="cuda"),
                        torch.zeros((bh, n_m, n_n), dtype=torch.int32, device="cuda"))
                mapped = dict(zip(("dq", "dk", "dv"), module.attention_backward(
                    q, k, v, o, lse, do, causal, dkdv_visits=maps[0], dq_visits=maps[1]), strict=True))
                banded, *_ = backward.run_backward(module, q, k, v, o, lse, do, causal, int(module.BLOCK_M),
                                                   int(getattr(module, "BLOCK_N", module.BLOCK_M)))
                for how, got in (("plain", grads), ("visits", mapped), ("check", banded)):
                    err = {g: round(float((t.double() - ref.grads[g].reshape(t.shape)).abs().max()), 5)
                           for g, t in got.items()}
                    print(f"{name:30s} {extra or 'default':14s} {'causal' if causal else 'full  '} {how:6s} {err}",
                          flush=True)


if __name__ == "__main__":
    main()
