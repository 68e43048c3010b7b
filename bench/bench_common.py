"""What the bench scripts share besides SDPA (:mod:`sdpa_baselines`): the interpreter
switch, loading a kernel file as a module, the timer, torch's flex_attention as a
baseline, and the harness's verdict on the shipped drill and the solution.

The scripts run as ``python bench/NAME.py`` (bench/ is then on ``sys.path``).  Nothing
here imports triton at import time: a script sets ``TRITON_INTERPRET`` first.
"""

from __future__ import annotations

import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any


def use_interpreter(asked: bool = False) -> bool:
    """Whether this run is on Triton's interpreter: ``asked`` (``--quick``), TRITON_INTERPRET=1
    already, or no GPU; then TRITON_INTERPRET=1 is set, so call it before triton's import."""
    import torch  # does not import triton

    interpreter = asked or os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available()
    if interpreter:
        os.environ["TRITON_INTERPRET"] = "1"
    return interpreter


def load(path: Path) -> ModuleType:
    """The kernel file at ``path`` as a module (registered under its stem, as Triton's
    JIT wants its functions' module importable)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def timer(interpreter: bool, samples: int = 1, warmup: int = 25, rep: int = 100) -> Callable[[Callable[[], Any]], float]:
    """A function timing a call in ms.  On the interpreter: one warm-up call, then the
    median wall clock of ``samples`` calls (relative figures only).  On a GPU:
    ``triton.testing.do_bench``'s median over ``rep`` ms after ``warmup`` ms."""

    def bench(fn: Callable[[], Any]) -> float:
        if interpreter:
            fn()
            times = []
            for _ in range(samples):
                start = time.perf_counter()
                fn()
                times.append((time.perf_counter() - start) * 1e3)
            return statistics.median(times)
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))

    return bench


def load_flex(interpreter: bool, cache_size_limit: int | None = None) -> tuple[Any, Any, str]:
    """(flex_attention, create_block_mask, why not) for a bench: ``torch.compile(flex_attention,
    dynamic=False)`` on a GPU, eager on the interpreter; None where torch has none (and the
    reason, first line, why).  ``cache_size_limit``: torch._dynamo's, raised where a bench
    compiles one kernel per shape."""
    flex = create = None
    try:
        import torch
        from torch.nn.attention.flex_attention import create_block_mask as create
        from torch.nn.attention.flex_attention import flex_attention as flex

        if not interpreter:
            if cache_size_limit is not None:
                import torch._dynamo

                torch._dynamo.config.cache_size_limit = cache_size_limit
            flex = torch.compile(flex, dynamic=False)
    except Exception as exc:  # noqa: BLE001 - any failure: say why and go on without it
        return flex, create, f"{type(exc).__name__}: {exc}".splitlines()[0][:160]
    return flex, create, ""


def harness_lines(drill: str, files: Sequence[tuple[str, Path, str, bool]], interpreter: bool) -> list[str]:
    """Each (label, kernel file, the verdict expected, timed) through the real harness on this
    device (``tutor.harness.check.run_check``), one line each: the verdict, the codes, the max
    abs error, whether it was the expected one, and for a timed file the timed launches' status
    (on a GPU their output is checked once against float64, so a wrong autotuned
    configuration shows there)."""
    from tutor.harness.check import run_check
    from tutor.harness.device import select_device
    from tutor.harness.job import CheckJob
    from tutor.report import verdict

    dev = select_device("cpu" if interpreter else "gpu")
    lines = []
    for label, path, want, timed in files:
        result = run_check(CheckJob(drill=drill, file=str(path), timing=timed), dev)
        got = verdict(result)
        err = "-" if result.max_abs_err is None else f"{result.max_abs_err:.1e}"
        timing = f"; timed launches: {result.performance.status} {result.performance.reason}" if timed else ""
        lines.append(f"{label:<17}: {got} (expected {want}; codes {result.codes}; max abs err {err}; "
                     f"{'ok' if got == want else 'UNEXPECTED'}{timing})")
    return lines


def best_split(row: dict[str, Any], gbytes: float) -> None:
    """A decode bench's row, completed: the split count of the fewest ms in its sweep
    (``row["split_ms"]``), that time, and the bandwidths (``gbytes`` of K and V read per
    step) of SDPA, the default split count and the best one."""
    best = min(row["split_ms"], key=row["split_ms"].get)
    row.update(best_splits=best, best_ms=row["split_ms"][best], sdpa_gbs=gbytes / row["sdpa_ms"] * 1e3,
               default_gbs=gbytes / row["default_ms"] * 1e3, best_gbs=gbytes / row["split_ms"][best] * 1e3)


def decode_summary_head(json_path: Path | None, gpu: str, header: str, checks: list[str],
                        rows: list[dict[str, Any]]) -> None:
    """After a decode bench's rows: every number to ``json_path`` (when given), then the
    header and the harness lines again, above the tables."""
    if json_path:
        import torch
        import triton

        json_path.write_text(json.dumps({"device": gpu, "torch": torch.__version__, "triton": triton.__version__,
                                         "checks": checks, "rows": rows}, indent=1))
    print()
    print(header)
    print(*checks, sep="\n")
    print()


def gbs(x: float) -> str:
    """A bandwidth in GB/s for a table: whole numbers from 10 up, two figures below."""
    return f"{x:.0f}" if x >= 10 else f"{x:.2g}"
