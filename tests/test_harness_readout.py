"""The read-out's measurements agree with independent computations.

The fast tests feed :func:`tutor.harness.problems.attention.readout.measure` weight matrices built
here, by hand, for each kind of mistake (a 0 mask, a missing key, a missing
scale, no final division, a stale maximum, keys of score 0 in the sum) and
check every measured number against one computed here with plain loops and
``math`` - never with the harness's own code.  The slow tests read the
weights out of real kernels through the interpreter.
"""

from __future__ import annotations

import math

import pytest
import torch

from tutor.harness.problems.attention import readout
from tutor.harness.result import CheckResult, ReadOut

H, N, D = 2, 96, 64  # heads, seq, head_dim: three 32-key blocks
BM = BN = 32


def _scores(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(H, N, D, generator=g, dtype=torch.float64)
    k = torch.randn(H, N, D, generator=g, dtype=torch.float64)
    return (q @ k.transpose(-1, -2)) / math.sqrt(D)


def _row_softmax(scores: list[float], keep: list[bool], temperature: float = 1.0) -> list[float]:
    """softmax of one row over the kept keys, with plain math."""
    top = max(s * temperature for s, k in zip(scores, keep, strict=True) if k)
    e = [math.exp(s * temperature - top) if k else 0.0 for s, k in zip(scores, keep, strict=True)]
    total = sum(e)
    return [x / total for x in e]


def _build(s: torch.Tensor, row_fn) -> torch.Tensor:
    """Weights (H, N, N) from a function of (head, row, that row's scores as a list)."""
    w = torch.zeros(H, N, N, dtype=torch.float64)
    for h in range(H):
        for r in range(N):
            w[h, r] = torch.tensor(row_fn(h, r, s[h, r].tolist()), dtype=torch.float64)
    return w


def _causal(r: int) -> list[bool]:
    return [c <= r for c in range(N)]


def _measure(w: torch.Tensor, s: torch.Tensor, causal: bool = True) -> ReadOut:
    return readout.measure(w, s, causal, BM, BN, D)


def test_a_right_kernel_in_fp16_measures_right():
    s = _scores()
    w = _build(s, lambda h, r, row: _row_softmax(row, _causal(r))).to(torch.float16).to(torch.float64)
    ro = _measure(w, s)
    assert not readout.abnormal(ro), ro
    assert ro.forbidden_rows == ro.missing_rows == 0 and not ro.nan_rows
    assert ro.temperature_name == "right" and abs(ro.temperature - 1) < 0.01
    assert ro.block_pattern == "consistent" and ro.sums_to_one
    assert set("".join(ro.map_marks)) <= {".", " "}


def test_a_zero_mask_is_measured_as_one():
    """Future keys of the diagonal block get score 0 (not -inf); the loop bound is right."""
    s = _scores(1)

    def row(h, r, scores):
        diag_end = (r // BM + 1) * BM
        keep = [c < diag_end for c in range(N)]
        zeroed = [sc if c <= r else 0.0 for c, sc in enumerate(scores)]
        return _row_softmax(zeroed, keep)

    w = _build(s, row)
    ro = _measure(w, s)
    # independently: the largest weight a row puts after itself
    masses = [(sum(w[h, r, r + 1:].tolist()), r) for h in range(H) for r in range(N)]
    mass, where = max(masses)
    assert ro.forbidden_mass == pytest.approx(mass, abs=1e-9) and ro.forbidden_row == where
    assert ro.forbidden_where == "diagonal-block" and ro.forbidden_score == "zero"
    assert ro.forbidden_rows == sum(1 for r in range(N) if (r + 1) % BM)  # the last row of a block has no future there
    assert any("+" in line for line in ro.map_marks)


def test_a_missing_own_key_and_its_mass():
    s = _scores(2)
    w = _build(s, lambda h, r, row: _row_softmax(row, [c < r for c in range(N)]) if r else [float("nan")] * N)
    ro = _measure(w, s)
    assert ro.nan_rows == [0]
    assert ro.missing_where == "own-key" and ro.forbidden_rows == 0
    # the reference weight of each row's own key, worst row
    own = [(_row_softmax(s[h, r].tolist(), _causal(r))[r], r) for h in range(H) for r in range(1, N)]
    mass, where = max(own)
    assert ro.missing_mass == pytest.approx(mass, abs=1e-9) and ro.missing_row == where
    assert ro.missing_keys == [where]


@pytest.mark.parametrize(("factor", "name"), [
    (8.0, "scale-missing"), (1 / 8, "scale-twice"),
    (1 / math.log(2), "exp-not-exp2"), (math.log(2), "exp2-without-log2e"),
])
def test_the_temperature_is_named_by_its_value(factor: float, name: str):
    s = _scores(3)
    w = _build(s, lambda h, r, row: _row_softmax(row, _causal(r), temperature=factor))
    w = w.to(torch.float16).to(torch.float64)
    ro = _measure(w, s)
    assert ro.temperature == pytest.approx(factor, rel=0.02)
    assert ro.temperature_name == name


def test_no_final_division_leaves_rows_summing_to_the_running_sum():
    s = _scores(4)

    def row(h, r, scores):
        top = max(scores[: r + 1])
        return [math.exp(x - top) if c <= r else 0.0 for c, x in enumerate(scores)]

    w = _build(s, row)
    ro = _measure(w, s)
    sums = [sum(math.exp(x - max(s[h, r, : r + 1].tolist())) for x in s[h, r, : r + 1].tolist())
            for h in range(H) for r in range(N)]
    assert ro.row_sum_min == pytest.approx(min(sums)) and ro.row_sum_max == pytest.approx(max(sums))
    assert ro.block_pattern == "one-factor"
    assert ro.forbidden_rows == ro.missing_rows == 0


def test_keys_of_score_zero_in_the_sum_are_counted():
    """Full attention whose denominator holds 5 extra keys of score 0 (a ragged block unmasked)."""
    s = _scores(5)

    def row(h, r, scores):
        e = [math.exp(x) for x in scores]
        total = sum(e) + 5 * math.exp(0.0)
        return [x / total for x in e]

    ro = _measure(_build(s, row), s, causal=False)
    assert ro.phantom_keys == pytest.approx(5.0, abs=0.01)
    assert ro.extra_in_sum == "score-0-keys"


def test_a_stale_maximum_is_told_from_each_block_own_maximum():
    """acc not rescaled: each block weighed against the running max of its time; l right."""
    s = _scores(6)

    def stale(h, r, scores):
        running, acc = -math.inf, [0.0] * N
        for start in range(0, N, BN):
            block = range(start, start + BN)
            running = max(running, max(scores[c] for c in block))
            for c in block:
                acc[c] = math.exp(scores[c] - running)
        top = max(scores)
        total = sum(math.exp(x - top) for x in scores)
        return [a / total for a in acc]

    def own(h, r, scores):
        acc, total = [0.0] * N, 0.0
        for start in range(0, N, BN):
            block = range(start, start + BN)
            m = max(scores[c] for c in block)
            for c in block:
                acc[c] = math.exp(scores[c] - m)
                total += acc[c]
        return [a / total for a in acc]

    assert _measure(_build(s, stale), s, causal=False).block_pattern == "stale-max"
    assert _measure(_build(s, own), s, causal=False).block_pattern == "own-block-max"


def test_the_read_out_travels_through_json():
    s = _scores()
    ro = _measure(_build(s, lambda h, r, row: _row_softmax(row, _causal(r))), s)
    ro.case, ro.shape = "default", [1, H, N, D]
    result = CheckResult(drill="01", file="x.py", readout={"causal": ro})
    again = CheckResult.from_json(result.to_json())
    assert again.readout["causal"] == ro
    assert "map_marks" in result.to_dict()["readout"]["causal"]


# -- real kernels, through the interpreter -------------------------------------------------------
@pytest.mark.slow
def test_the_weights_of_real_kernels_match_an_independent_softmax(tmp_path):
    """The solution's read-out equals softmax(q·k/sqrt(d)) to fp16 resolution; a kernel
    whose mask writes 0 puts on the future exactly what a score of 0 gets."""
    from tutor.harness.device import select_device

    select_device("cpu")  # the interpreter, as the worker sets it, before the kernels are defined
    from tutor.authoring.student_kernels import load
    from tutor.catalog import get_drill
    from tutor.harness.loader import load_student_module

    g = torch.Generator().manual_seed(7)
    q, k = (torch.randn(1, 1, 100, 64, generator=g).to(torch.float16) for _ in range(2))
    qs, ks = q[0, 0].double(), k[0, 0].double()
    scores = (qs @ ks.T) / 8.0
    drill = get_drill("01")
    mask_zero = next(m for m in load(drill) if m.name == "mask_zero")
    (tmp_path / "mz.py").write_text(mask_zero.text(drill), encoding="utf-8")
    from tutor.catalog import solution_path

    right = load_student_module(solution_path(drill))
    w, launches = readout.weights(right, q, k, True)
    assert launches == 2  # ceil(100 / 64) key groups
    for r in (0, 37, 99):
        expected = _row_softmax(scores[r].tolist(), [c <= r for c in range(100)])
        assert max(abs(a - b) for a, b in zip(w[0, r].tolist(), expected, strict=True)) < 2e-3

    zero = load_student_module(tmp_path / "mz.py")
    ro = readout.read_out(zero, q, k, True, case="test", probe=False)
    worst = 0.0
    for r in range(100):
        block_end = min((r // 64 + 1) * 64, 100)
        keep = [c < block_end for c in range(100)]
        zeroed = [x if c <= r else 0.0 for c, x in enumerate(scores[r].tolist())]
        worst = max(worst, sum(_row_softmax(zeroed, keep)[r + 1:]))
    assert ro.forbidden_mass == pytest.approx(worst, abs=3e-3)
    assert ro.forbidden_score == "zero" and ro.launches == 2
