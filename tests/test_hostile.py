"""Hostile inputs (tutor/harness/problems/attention/hostile.py): scores that overflow exp unless the
running maximum is subtracted, a maximum that arrives in the last K/V block,
rows whose scores are all negative.  Unsafe kernels fail drill 02 with a code
that says why; every solution and correct-but-different kernel still passes.

The kernels run through the real harness (``run_check``, Triton's interpreter)
in this process; the mistakes come from solutions/NN_slug.mistakes.toml."""

from __future__ import annotations

import pytest
import torch

from tutor.authoring.student_kernels import load
from tutor.catalog import get_drill, solution_path
from tutor.harness import long_sum
from tutor.harness.check import run_check
from tutor.harness.device import select_device
from tutor.harness.job import CheckJob
from tutor.harness.problems.attention import hostile as inputs

# this helper's entries in the mistakes files ("# guard bands and hostile inputs")
OWN = {  # names; the guard-band entries are in tests/test_guard.py
    "01": ["no_running_max", "stale_max", "scores_in_fp16", "m_i_starts_at_zero", "masks_minus_1e9", "natural_exp"],
    "02": ["no_running_max", "stale_max", "scores_in_fp16", "m_i_starts_at_zero", "natural_exp", "mask_minus_1e9",
           "q_prescaled_in_fp16", "block_n_32"],
}
SEED = 7


def _scores(q, k):
    """Independent of the harness: scaled scores in float64, row by row."""
    q64, k64 = q.double(), k.double()
    return torch.einsum("bhid,bhjd->bhij", q64, k64) / q.shape[-1] ** 0.5


def test_hostile_inputs_are_finite_fp16_with_the_documented_row_groups():
    shape = (1, 2, 200, 64)
    q, k, v = inputs.hostile_inputs(shape, "cpu", torch.Generator().manual_seed(0))
    for t in (q, k, v):
        assert t.dtype == torch.float16 and torch.isfinite(t).all()
    s = _scores(q, k)
    groups = inputs.row_groups(200)
    large, late, negative, normal = (groups[name] for name in ("large", "late-max", "negative", "normal"))
    # large: every score (so every causal row, even one that sees a single key) far above
    # what exp of a raw score survives in fp16, and past fp32's exp2 limit at the top
    assert s[..., large, :].min() > 90 and s[..., large, :].amax(-1).min() > 100
    # late-max: the largest score of every such row is its last key's, far above the first block's
    top = s[..., late, :].argmax(-1)
    assert (top >= 192).all()
    assert (s[..., late, :].amax(-1) - s[..., late, :64].amax(-1)).min() > 90
    # negative: every score below 0 but not so low that a kernel whose m_i starts at 0 underflows
    assert s[..., negative, :].max() < 0 and s[..., negative, :].min() > -20
    assert s[..., normal, :].abs().max() < 8
    # early-max: the largest score is among the first keys; the last key lies RAMP_SCORE below them
    early = groups["early-max"]
    assert (s[..., early, :].argmax(-1) < 8).all()  # noise of ~1 against a fall of 0.75 a key
    assert (s[..., early, :1] - s[..., early, -1:]).min() > 140
    # mid-max: the largest score is in the middle, far above the first block's
    mid = s[..., groups["mid-max"], :]
    assert ((mid.argmax(-1) - 100).abs() <= 8).all() and (mid.amax(-1) - mid[..., :64].amax(-1)).min() > 40
    # drop: the first eighth of the keys score more than fp32's exp2 range (~87 natural) above the rest
    drop = s[..., groups["drop"], :]
    assert (drop[..., :25].amin(-1) - drop[..., 25:].amax(-1)).min() > 100


def _check(drill: str, path) -> object:
    return run_check(CheckJob(drill=drill, file=str(path), timing=False, seed=SEED), select_device("cpu"))


def _errors_and_findings(result) -> list[str]:
    return [d.code for d in result.diagnosis if d.severity in ("error", "finding")]


@pytest.mark.slow
@pytest.mark.parametrize("drill", ["01", "02"])
def test_every_solution_passes_every_case_including_the_hostile_one(drill):
    root = solution_path(get_drill(drill)).parent
    for path in sorted(root.glob(f"{drill}_*.py")):
        result = _check(drill, path)
        assert result.error is None, (path.name, result.error)
        names = [c.name for c in result.cases]
        assert "hostile" in names, names
        assert result.passed, (path.name, [(c.name, c.causal, c.max_abs_err) for c in result.cases])
        assert _errors_and_findings(result) == [], (path.name, result.codes)


def _own(drill: str):
    found = {m.name: m for m in load(get_drill(drill))}
    return [found[name] for name in OWN[drill]]


@pytest.mark.slow
@pytest.mark.parametrize("mistake", [m for d in OWN for m in _own(d)], ids=lambda m: m.stem)
def test_each_hostile_mistake_entry_gets_its_verdict_and_codes(mistake, tmp_path):
    drill = get_drill(mistake.drill)
    path = tmp_path / f"{mistake.stem}.py"
    path.write_text(mistake.text(drill), encoding="utf-8")
    result = _check(mistake.drill, path)
    assert result.error is None, result.error
    assert result.passed == mistake.passes, [(c.name, c.causal, c.max_abs_err) for c in result.cases]
    assert _errors_and_findings(result) == list(mistake.codes), [d.message for d in result.diagnosis]
    if not mistake.passes:
        # unsafe numerics: only the hostile case fails, every standard-normal case passes
        assert {c.name for c in result.cases if not c.passed} == {"hostile"}


def test_the_long_sum_case_is_exact_and_names_an_fp16_running_sum_only_where_it_passes_65504():
    """q = 0 gives even weights (p = 1 exactly) and V's column 0 of 512 sums past fp16's range from
    128 keys on; a column 0 wrong in exactly those rows of the causal launch is said as an fp16
    running sum, one wrong elsewhere is not."""
    q, k, v = inputs.long_sum_inputs((1, 1, 136, 64), "cpu", torch.Generator().manual_seed(0))
    assert bool((q == 0).all()) and bool((v[..., 0] == long_sum.LONG_SUM_V).all())
    expected = inputs.attention_reference(q, k, v, causal=True)
    assert bool(((expected[..., 0] - long_sum.LONG_SUM_V).abs() < 1e-9).all())
    keys = long_sum.causal_keys(136, True)

    def words_for(out: torch.Tensor) -> str:
        return long_sum.long_sum_words(out, expected, keys, 0.02, "the long-sum causal case (seq=136)")

    assert words_for(expected.to(torch.float16)) == ""
    fp16_sum = expected.clone()
    fp16_sum[..., 127:, 0] = float("inf")  # row 127 sees 128 keys: 128 * 512 = 65536 > 65504
    words = words_for(fp16_sum)
    assert "rows 127..135" in words and "the running sum (acc) is kept in fp16" in words, words
    elsewhere = expected.clone()
    elsewhere[..., 100:, 0] = 0.0
    words = words_for(elsewhere)
    assert "rows 100..135" in words and "fp16" not in words, words
    gaps = expected.clone()
    gaps[..., 127:, 0] = float("inf")
    gaps[..., 130, 0] = expected[..., 130, 0]  # one row in the run is right: not the rows past 65504
    words = words_for(gaps)
    assert "rows 127..129, 131..135" in words and "fp16" not in words, words


def test_an_output_of_fp16_rounded_scores_is_recognised_and_the_truth_is_not():
    """Attention computed (in float64) from scores rounded to fp16 in the exp2 domain is named as such;
    the true attention, and the one from natural-unit rounding, are not called log2-unit rounding."""
    q, k, v = inputs.hostile_inputs((1, 1, 136, 64), "cpu", torch.Generator().manual_seed(SEED))
    s = _scores(q, k)
    log2e = 1 / torch.log(torch.tensor(2.0, dtype=torch.float64))
    rounded = torch.softmax((s * log2e).half().double() / log2e, dim=-1) @ v.double()
    truth = torch.softmax(s, dim=-1) @ v.double()
    words = inputs.rounded_scores_words(rounded, truth, inputs.scores(q, k, False), v, 0.02)
    assert "attention computed from scores rounded to fp16 in log2 units" in words, words
    assert inputs.rounded_scores_words(truth, truth, inputs.scores(q, k, False), v, 0.02) == ""
    natural = torch.softmax(s.half().double(), dim=-1) @ v.double()
    assert "in log2 units" not in inputs.rounded_scores_words(natural, truth, inputs.scores(q, k, False), v, 0.02)


def test_ordinary_rows_that_come_out_nan_are_said_to_come_from_other_rows():
    """Rows whose scores stay within fp16's range that come out NaN (a maximum over the block's rows,
    blind round 23) are not 'no running maximum'."""
    q, k, v = inputs.hostile_inputs((1, 1, 136, 64), "cpu", torch.Generator().manual_seed(SEED))
    expected = torch.softmax(_scores(q, k), dim=-1) @ v.double()
    out = expected.clone()
    out[..., inputs.row_groups(136)["normal"], :] = float("nan")
    (code, detail), = inputs.hostile_findings(out, expected, q, k, False, 64, 0.02, False, v)
    assert code == "hostile-wrong" and "have only ordinary scores" in detail and "'normal'" in detail, detail
    out = expected.clone()
    out[..., inputs.row_groups(136)["large"], :] = float("nan")  # only rows whose scores overflow: not that
    (_, detail), = inputs.hostile_findings(out, expected, q, k, False, 64, 0.02, False, v)
    assert "have only ordinary scores" not in detail, detail
