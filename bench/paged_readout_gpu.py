"""Drill 07's weights read-out on a GPU: for student-like kernels of
solutions/07_paged_decode.mistakes.toml, the diagnosis says each entry's GPU codes, its
read-out launches compile nothing new (every variant was compiled by the verdict) and run
on the shapes, strides, dtypes and alignments of a correctness launch; prints the time of
the verdict and of the diagnosis.  Exit 1 on any miss.

    python3 bench/paged_readout_gpu.py [--only name,name]   # default: every entry
    python3 bench/paged_readout_gpu.py --cpu --only offset_missing   # a dry run on Triton's interpreter
                                                                     # (its loads not counted: the GPU path)
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tutor.harness.device import select_device

ON_CPU = "--cpu" in sys.argv
select_device("cpu" if ON_CPU else "gpu")  # before triton's import

import torch  # noqa: E402
import triton  # noqa: E402

from tutor.authoring import student_kernels as mistakes  # noqa: E402
from tutor.catalog import get_drill  # noqa: E402
from tutor.harness.loader import load_student_module  # noqa: E402
from tutor.harness.problems import paged_decode as paged  # noqa: E402


def compiled(module: ModuleType) -> int:
    """Variants compiled so far by the module's jitted kernels (Triton's per-device caches)."""
    total = 0
    for value in vars(module).values():
        caches = getattr(value, "device_caches", None) if isinstance(value, triton.runtime.JITFunction) else None
        for cache in (caches or {}).values():
            total += len(cache[0])
    return total


def recording(module: ModuleType, calls: list[tuple]) -> None:
    launcher = module.attention

    def attention(q: torch.Tensor, k_pages: torch.Tensor, v_pages: torch.Tensor, block_table: torch.Tensor,
                  lengths: torch.Tensor, out: torch.Tensor | None = None) -> object:
        calls.append(tuple((tuple(t.shape), tuple(t.stride()), t.dtype, t.data_ptr() % 16)
                           for t in (q, k_pages, v_pages, block_table, lengths, out) if t is not None))
        return launcher(q, k_pages, v_pages, block_table, lengths, out=out)

    module.attention = attention


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="only these entries, e.g. offset_missing,table_column_shifted")
    parser.add_argument("--cpu", action="store_true", help="a dry run on Triton's interpreter, loads not counted")
    args = parser.parse_args()
    drill = get_drill("07")
    entries = [e for e in mistakes.load(drill) if not args.only or e.name in args.only.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="flashtutor-paged-readout-"))
    misses = 0
    for entry in entries:
        path = scratch / f"{entry.stem}.py"
        path.write_text(entry.text(drill), encoding="utf-8")
        module = load_student_module(path)
        calls: list[tuple] = []
        recording(module, calls)
        start = time.perf_counter()
        correctness = paged.check_correctness(drill, module, ON_CPU, "cpu" if ON_CPU else "cuda",
                                              torch.Generator().manual_seed(0), count_reads=False)
        verdict_s = time.perf_counter() - start
        verdict, before = set(calls), compiled(module)
        del calls[:]
        start = time.perf_counter()
        codes = [d.code for d in correctness.diagnose().diagnosis]
        diagnose_s = time.perf_counter() - start
        new = compiled(module) - before
        must = list(entry.codes if ON_CPU or entry.gpu_codes is None else entry.gpu_codes)
        strange = set(calls) - verdict
        ok = codes == must and new == 0 and not strange
        misses += not ok
        print(f"{'ok  ' if ok else 'MISS'} {entry.name:<28} codes {codes} (must {must}); {len(calls)} read-out launches,"
              f" {new} new compiles{', other signatures' if strange else ''}; verdict {verdict_s:.2f} s,"
              f" diagnosis {diagnose_s:.2f} s", flush=True)
    print(f"{len(entries) - misses}/{len(entries)} entries as they must be")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
