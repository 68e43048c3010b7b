"""Drill 04's diagnosis-phase measurements on tensors made in plain PyTorch (no kernel):
the P read-out through dV with one-hot dO, what it says about a P built wrong on
purpose, the hostile case's inputs and allowance, and where a NaN is located."""

from __future__ import annotations

import math

import pytest
import torch

from tutor.catalog import get_drill
from tutor.harness.problems import attention_backward as bwd
from tutor.harness.problems import backward_readout as readout
from tutor.harness.result import CaseResult

DRILL = get_drill("04")


def _case(seq: int = 150, causal: bool = False, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v, do = bwd.random_case((1, 2, seq, 64), "cpu", g)
    return q, k, v, do, bwd.reference(q, k, v, do, causal)


def _read(p: torch.Tensor, do: torch.Tensor) -> readout.PReadout:
    """read_p against a 'kernel' whose dV is exactly P^T dO (fp16, as a kernel stores it)."""
    def backward(probe: torch.Tensor) -> torch.Tensor:
        return (p.transpose(-1, -2) @ probe.to(torch.float64)).to(torch.float16)

    found = readout.read_p(backward, do)
    assert found is not None
    return found


def test_one_hot_do_reads_the_last_head_dim_rows_of_p():
    _, _, _, do, ref = _case()
    read = _read(ref.p, do)
    assert read.rows == list(range(150 - 64, 150))
    assert torch.allclose(read.p, ref.p.reshape(2, 150, 150)[:, 86:], atol=1e-3)
    shape = readout.describe(read, ref.s, ref.lse, ref.allowed, 64, ref.lse.float())
    assert shape.right


def test_a_short_sequence_is_read_whole():
    _, _, _, do, ref = _case(seq=37)
    assert _read(ref.p, do).rows == list(range(37))


def test_an_lse_from_the_first_query_block_is_a_per_row_factor_and_the_row_is_named():
    _, _, _, do, ref = _case()
    rows = torch.arange(150)
    used = ref.lse[..., rows % 64]  # the first query block's row at the same position
    p = torch.exp(ref.s - used[..., None])
    shape = readout.describe(_read(p, do), ref.s, ref.lse, ref.allowed, 64, ref.lse.float())
    assert shape.per_row and shape.wrong_rows
    assert all(m == r % 64 for r, m in shape.lse_from.items()) and len(shape.lse_from) >= 0.9 * len(shape.wrong_rows)


def test_an_lse_indexed_by_key_block_is_a_per_block_factor():
    _, _, _, do, ref = _case()
    block = torch.arange(150) // 64
    shift = (block.double() - 1.0)[None, None, None, :] * 0.3  # a different lse per key block
    p = torch.exp(ref.s - ref.lse[..., None] - shift)
    shape = readout.describe(_read(p, do), ref.s, ref.lse, ref.allowed, 64, ref.lse.float())
    assert not shape.per_row and shape.per_block


def test_every_row_of_a_long_sequence_is_judged_relative_to_its_p():
    """Run 32 (H100): at seq 1024 every P is ~1/N, under 0.01 absolute on every pair; an lse
    loaded at the key block's offsets is off by a few % everywhere and must not read as right."""
    g = torch.Generator().manual_seed(1)
    q, k, v, do = bwd.random_case((1, 1, 1024, 128), "cpu", g)
    ref = bwd.reference(q, k, v, do, False)
    rows = torch.arange(1024)
    src = rows[:, None] % 64 + rows[None, :] // 64 * 64  # row i, key j: lse of row (j's block) * 64 + i % 64
    p = torch.exp(ref.s - ref.lse[..., src])
    absolute = int(((p - ref.p)[..., -128:, :].abs() > 0.01).any(-1).sum())
    assert absolute <= 16, absolute  # of the 128 rows read, an absolute test sees a few
    shape = readout.describe(_read(p, do), ref.s, ref.lse, ref.allowed, 64, ref.lse.float())
    assert not shape.right and shape.per_block
    assert len(shape.wrong_rows) >= 120, len(shape.wrong_rows)  # all but rows whose lse happens to match


def test_exp2_of_natural_scores_is_a_slope_of_ln2():
    _, _, _, do, ref = _case()
    p = torch.exp2(ref.s - ref.lse[..., None])
    shape = readout.describe(_read(p, do), ref.s, ref.lse, ref.allowed, 64, ref.lse.float())
    assert shape.slope is not None and abs(shape.slope - math.log(2)) < 0.05


def test_a_strict_causal_mask_is_measured_on_the_diagonal():
    _, _, _, do, ref = _case(causal=True)
    strict = torch.ones(150, 150, dtype=torch.bool).tril(-1)
    p = torch.where(strict, ref.p, torch.zeros(()))
    shape = readout.describe(_read(p, do), ref.s, ref.lse, ref.allowed, 64, ref.lse.float())
    assert shape.missing_pairs and set(shape.missing_kinds) == {"the diagonal (key = row)"}
    assert not shape.extra_pairs


def test_the_hostile_case_has_scores_past_exps_fp32_range_in_a_whole_number_of_blocks():
    q, k, v, do = bwd.hostile_case("cpu", torch.Generator().manual_seed(0))
    assert q.shape[-2] % 64 == 0 and q.shape[-2] % 128 == 0
    s = bwd.reference(q, k, v, do, True).s
    row_max = s.masked_fill(~torch.ones(128, 128, dtype=torch.bool).tril(), -math.inf).amax(-1).flatten()
    assert int((row_max > bwd.FP32_EXP_LIMIT).sum()) >= 64  # the large and early rows, the late ones past ~75
    assert all(torch.isfinite(t.float()).all() for t in (q, k, v, do))


@pytest.mark.parametrize("causal", [False, True])
def test_the_allowance_holds_fp16_rounding_and_not_a_p_three_percent_off(causal):
    q, k, v, do = bwd.hostile_case("cpu", torch.Generator().manual_seed(0))
    ref = bwd.reference(q, k, v, do, causal)
    allowed = bwd.allowances(ref, q, k, v, do, DRILL.tolerance)
    for g in bwd.GRADS:  # the true gradient, stored in fp16, is well inside
        rounded = ref.grads[g].to(torch.float16).to(torch.float64)
        assert bool(((rounded - ref.grads[g]).abs() <= allowed[g] / 4).all())
    # the absolute tolerance alone would fail a correct kernel here: the gradients are large
    assert max(float(ref.grads[g].abs().max()) for g in bwd.GRADS) * 2.0**-11 > DRILL.tolerance / 4
    # P 3 % off on the large rows (a score rounded to fp16 at ~120) moves dK past its allowance
    p = ref.p.clone()
    p[..., 1::4, :] *= 1.03
    dp = do.double() @ v.double().transpose(-1, -2)
    ds = p * (dp - (do.double() * ref.o).sum(-1, keepdim=True))
    dk = ds.transpose(-1, -2) @ q.double() * 64**-0.5
    assert bool(((dk - ref.grads["dk"]).abs() > allowed["dk"]).any())


def test_a_nan_is_located_by_gradient_rows_and_loop_and_tied_to_overflowing_scores():
    q, k, v, do = bwd.hostile_case("cpu", torch.Generator().manual_seed(0))
    ref = bwd.reference(q, k, v, do, False)
    row_max = ref.s.amax(-1)  # (1, 1, N)
    dq = ref.grads["dq"].clone()
    dq[row_max > bwd.FP32_EXP_LIMIT] = float("nan")  # the rows an exp(s) would overflow
    grads = {"dq": dq.to(torch.float16), "dk": ref.grads["dk"].to(torch.float16),
             "dv": ref.grads["dv"].to(torch.float16)}
    nan = int(torch.isnan(dq).sum())
    case = CaseResult(name="hostile", causal=False, shape=list(q.shape), max_abs_err=None, passed=False, nonfinite=nan)
    launch = bwd.BackwardLaunch(
        case=case, q=q, k=k, v=v, do=do, o=ref.o.to(torch.float16), lse=ref.lse.float(), grads=grads, ref=ref,
        forward_ok=True, forward_detail="", per_grad_err=dict.fromkeys(bwd.GRADS, None),
        unwritten=dict.fromkeys(bwd.GRADS, 0), nonfinite={"dq": nan, "dk": 0, "dv": 0},
        out_of_bounds=dict.fromkeys(bwd.GRADS, False), dkdv_visits=torch.ones(1, 2, 2, dtype=torch.int32),
        dq_visits=torch.ones(1, 2, 2, dtype=torch.int32),
    )
    detail = bwd.nonfinite_detail(launch)
    assert "only dQ holds them" in detail and "`_bwd_dq`" in detail
    assert "exactly the rows with a score above 88.7" in detail


def test_spans_are_runs():
    assert bwd.spans([5, 1, 2, 3, 9]) == "1-3, 5, 9"


def _launch_with(dk_d=None, d_both=None, seq: int = 150) -> bwd.BackwardLaunch:
    """A launch whose dK (or dQ and dK) are computed in float64 with another D."""
    g = torch.Generator().manual_seed(3)
    q, k, v, do = bwd.random_case((1, 2, seq, 64), "cpu", g)
    ref = bwd.reference(q, k, v, do, False)
    do64 = do.double()
    dp = do64 @ v.double().transpose(-1, -2)
    d_true = (do64 * ref.o).sum(-1)
    grads = {name: ref.grads[name].clone() for name in bwd.GRADS}
    for name, d in (("dk", dk_d), ("dq", d_both), ("dk", d_both)):
        if d is None:
            continue
        ds = ref.p * (dp - d(d_true, do64, ref.o)[..., None])
        grads[name] = (ds @ k.double() if name == "dq" else ds.transpose(-1, -2) @ q.double()) * 64**-0.5
    grads = {name: t.to(torch.float16) for name, t in grads.items()}
    errors = {n: float((grads[n].double() - ref.grads[n]).abs().max()) for n in bwd.GRADS}
    case = CaseResult(name="default", causal=False, shape=list(q.shape), max_abs_err=max(errors.values()),
                      passed=False)
    visits = torch.ones((2, 3, 3), dtype=torch.int32)
    return bwd.BackwardLaunch(
        case=case, q=q, k=k, v=v, do=do, o=ref.o.to(torch.float16), lse=ref.lse.float(), grads=grads, ref=ref,
        forward_ok=True, forward_detail="", per_grad_err=errors, unwritten=dict.fromkeys(bwd.GRADS, 0),
        nonfinite=dict.fromkeys(bwd.GRADS, 0), out_of_bounds=dict.fromkeys(bwd.GRADS, False),
        dkdv_visits=visits, dq_visits=visits.clone(),
    )


def test_a_dkdv_loop_reading_the_first_blocks_d_is_fitted_row_by_row():
    launch = _launch_with(dk_d=lambda d, do, o: d[..., torch.arange(150) % 64])
    code, detail = bwd.explain(launch, DRILL.tolerance, 64, 64)
    assert code == "dk-wrong"
    assert "another D on rows 64-" in detail and "row (r mod 64)'s D" in detail


def test_a_d_scaled_by_sm_scale_is_measured_as_a_multiple_in_both_loops():
    launch = _launch_with(d_both=lambda d, do, o: d * 64**-0.5)
    code, detail = bwd.explain(launch, DRILL.tolerance, 64, 64)
    assert code == "d-wrong" and "0.125 x rowsum(dO * O)" in detail and "both loops" in detail


def test_a_d_summed_down_the_blocks_rows_is_named():
    def axis0(d, do, o):
        prod = torch.cat([do * o, (do * o).new_zeros(1, 2, 192 - 150, 64)], -2)
        return torch.unflatten(prod, -2, (3, 64)).sum(-2).flatten(-2)[..., :150]

    code, detail = bwd.explain(_launch_with(d_both=axis0), DRILL.tolerance, 64, 64)
    assert code == "d-wrong" and "axis 0" in detail
