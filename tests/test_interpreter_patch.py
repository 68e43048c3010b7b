"""Triton's interpreter with one language swap per launch (tutor/harness/interpreter_patch.py)
gives the same bits as Triton's interpreter as shipped, for real checks and for kernels that
call @triton.jit functions of their own (helpers, a reduction's combine function)."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from helpers_harness import check_jobs, job, shipped_drill, shipped_solution

from tutor.harness.interpreter_patch import DISABLE_ENV

KERNELS = textwrap.dedent('''
    import hashlib, json, sys
    from tutor.harness.device import select_device
    from tutor.harness import interpreter_patch

    select_device("cpu")
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _scale(x, s):
        return x * s

    @triton.jit
    def _pick_larger(a, b):
        return tl.where(a > b, a, b)

    @triton.jit
    def _rows(x_ptr, out_ptr, N: tl.constexpr):
        row = tl.program_id(0)
        x = tl.load(x_ptr + row * N + tl.arange(0, N))
        m = tl.reduce(x, 0, _pick_larger)          # a reduction with a jit combine function
        p = tl.exp(_scale(x - tl.max(x, 0), 0.5))  # a helper, then triton.language.standard's max
        tl.store(out_ptr + row * N + tl.arange(0, N), p / tl.sum(p, 0) + m)

    @triton.jit
    def _broken(x_ptr, N: tl.constexpr):
        x = tl.load(x_ptr + tl.arange(0, N))
        tl.store(x_ptr + tl.arange(0, N), tl.dot(_scale(x, 2.0), x))  # a 1-D dot: raises

    x = torch.randn(6, 16, generator=torch.Generator().manual_seed(0))
    digests = []
    for _ in range(2):
        out = torch.empty_like(x)
        _rows[(6,)](x, out, N=16)
        digests.append(hashlib.sha256(out.numpy().tobytes()).hexdigest())
        try:
            _broken[(1,)](x.clone(), N=16)
            digests.append("no error")
        except Exception as exc:  # the launch fails the same way, and the next one still runs
            digests.append(type(exc).__name__)
    print(json.dumps({"installed": interpreter_patch.install(), "digests": digests,
                      "counts": interpreter_patch.swap_counts()}))
''')


def run_kernels(patch_once: str) -> dict:
    done = subprocess.run([sys.executable, "-c", KERNELS], capture_output=True, text=True, timeout=120,
                          env={**os.environ, DISABLE_ENV: patch_once})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_kernels_with_jit_helpers_give_the_same_bits_with_one_swap_per_launch():
    shipped, once = run_kernels("0"), run_kernels("1")
    assert not shipped["installed"] and once["installed"]
    assert once["digests"] == shipped["digests"]
    assert once["digests"][0] == once["digests"][2] and once["digests"][1] == "InterpreterError"
    # four launches: each swaps its kernel's language and, at its first device call, tl.core;
    # every other device call (the helpers, tl.max, tl.sum, each combine step) skips the walk
    assert once["counts"]["swaps"] <= 8 and once["counts"]["skipped"] > 20, once["counts"]
    assert shipped["counts"] == {"swaps": 0, "skipped": 0}


def comparable(result) -> dict:
    """What a check says, without what the clock says, its floats to 12 significant digits
    (a float64 fit's last bit can differ between two runs of the same arithmetic on a busy
    machine: fit_rms 2.876867381397628e-04 against ...398369 in one CI run)."""
    data = result.to_dict()
    for key in ("duration_s", "verdict_s", "performance"):
        data.pop(key, None)
    data["diagnosis_phase"].pop("duration_s", None)
    for cost in data["costs"].values():  # each phase's launches and compiles stay; its seconds go
        cost.pop("seconds", None)
    return _rounded(data)


def _rounded(value):
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


@pytest.mark.slow
def test_checks_are_the_same_with_one_swap_per_launch(monkeypatch):
    files = {"01 solution": (shipped_solution("01"), "01"), "02 shipped": (shipped_drill("02"), "02"),
             "05 solution": (shipped_solution("05"), "05"), "06 shipped": (shipped_drill("06"), "06")}
    jobs = [job(path, drill, seed=7) for path, drill in files.values()]
    once = check_jobs(jobs)
    monkeypatch.setenv(DISABLE_ENV, "0")
    shipped = check_jobs(jobs)
    assert [r.outcome for r in once] == ["solved", "failed", "solved", "failed"]
    for name, a, b in zip(files, once, shipped, strict=True):
        assert comparable(a) == comparable(b), name


OVERFLOW = textwrap.dedent('''
    import json
    from tutor.harness.device import select_device

    select_device("cpu")
    import torch
    import triton
    import triton.language as tl
    from triton.runtime import interpreter

    @triton.jit
    def _wrap(out_ptr, a, b):
        tl.store(out_ptr, a * b)  # int32 * int32 past 2**31

    out = torch.zeros(1, dtype=torch.int32)
    try:
        _wrap[(1,)](out, 65536, 65537)
        got = int(out[0])
    except Exception as exc:  # Triton's own check refuses the overflow
        got = type(exc).__name__
    print(json.dumps({"checked": interpreter.interpreter_builder.options.sanitize_overflow, "got": got}))
''')


@pytest.mark.parametrize(("keep_check", "checked"), [("0", False), ("1", True)])
def test_the_int32_overflow_check_is_skipped_and_arithmetic_still_wraps_as_on_a_gpu(keep_check, checked):
    from tutor.harness.interpreter_patch import OVERFLOW_CHECK_ENV

    done = subprocess.run([sys.executable, "-c", OVERFLOW], capture_output=True, text=True, timeout=120,
                          env={**os.environ, OVERFLOW_CHECK_ENV: keep_check})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["checked"] is checked
    # 65536 * 65537 = 2**32 + 65536 wraps to 65536 in int32, as CUDA computes it, either way:
    # outside debug mode Triton's check computes its answer and drops it
    assert found["got"] == 65536
