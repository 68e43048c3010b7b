"""An autotuned kernel on Triton's interpreter (tutor/harness/interpreter_autotune.py): drill
01's solution written the way Triton's tutorials write it, with ``@triton.autotune`` over
several configs, is checked on the CPU (as shipped, Triton's autotuner fails there: "0 active
drivers"), with its first config; tile sizes other than the module's are said as such."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_harness import check_jobs, job, shipped_solution

from tutor.harness.interpreter_autotune import DISABLE_ENV

DECORATED = '''@triton.autotune(configs=[triton.Config({{"BLOCK_M": m, "BLOCK_N": n}}, num_warps=w)
                         for m, n, w in [{configs}]], key=["N_CTX", "HEAD_DIM"])
@triton.jit
def _attn_fwd('''


def autotuned(path: Path, configs: str) -> Path:
    """Drill 01's solution with its tiles autotuned over ``configs`` ("(m, n, warps), ...")."""
    text = shipped_solution("01").read_text(encoding="utf-8")
    edits = [("@triton.jit\ndef _attn_fwd(", DECORATED.format(configs=configs)),
             ("HEAD_DIM=head_dim, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N,", "HEAD_DIM=head_dim,"),
             ("grid = (triton.cdiv(seq, BLOCK_M), batch * heads)",
              "grid = lambda meta: (triton.cdiv(seq, meta['BLOCK_M']), batch * heads)")]
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.slow
def test_an_autotuned_kernel_is_checked_with_its_first_config(tmp_path, monkeypatch):
    same = autotuned(tmp_path / "01_same_tiles_first.py", "(64, 64, 4), (32, 32, 4)")
    other = autotuned(tmp_path / "01_other_tiles_first.py", "(32, 32, 4), (64, 64, 8)")
    first, second = check_jobs([job(same, "01"), job(other, "01")])
    for result in (first, second):
        assert result.error is None, result.error
        assert result.passed, [(c.name, c.max_abs_err) for c in result.cases]
    assert first.codes == [] and first.visits is not None  # the module's own tiles: its visits are read
    said = {d.code: d.message for d in second.diagnosis}
    assert "BLOCK_M = 32, BLOCK_N = 32" in said["launch-blocks-differ"]  # the first config's tiles ran


@pytest.mark.slow
def test_without_the_patch_the_interpreter_cannot_run_it(tmp_path, monkeypatch):
    """What the patch is for: Triton's autotuner as shipped times configs through a driver."""
    monkeypatch.setenv(DISABLE_ENV, "0")  # the worker process inherits it
    result = check_jobs([job(autotuned(tmp_path / "01_tuned.py", "(64, 64, 4), (32, 32, 4)"), "01")])[0]
    assert result.error is not None and "active drivers" in result.error.message
