"""Drill 04's D-term probe (V = 0, one-hot dO, so dP = 0 and D = 2) on backwards written
in plain float64 PyTorch with one term changed on purpose (no kernel): what each loop's
read-out measures, and that a right backward reads as right."""

from __future__ import annotations

import torch

from tutor.harness.problems import attention_backward as bwd
from tutor.harness.problems import backward_ds_readout as dterm

SEQ, D = 150, 64
SCALE = D**-0.5


def _case(causal: bool = True, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, k, v, do = bwd.random_case((1, 2, SEQ, D), "cpu", g)
    return q, k, v, do, bwd.reference(q, k, v, do, causal)


def _model(ref: bwd.Reference, q: torch.Tensor, k: torch.Tensor, **change):
    """A backward (v, o, do) -> (dQ, dK) in fp16 like a kernel's store, one term changeable:
    dq_d (the dQ loop's D), dq_p (its P), dq_scale, dk_d, dk_scale."""
    q64, k64 = q.to(torch.float64), k.to(torch.float64)

    def backward(v: torch.Tensor, o: torch.Tensor, do: torch.Tensor):
        v64, o64, do64 = (t.to(torch.float64) for t in (v, o, do))
        dp = do64 @ v64.transpose(-1, -2)
        d_true = (do64 * o64).sum(-1)
        d_q = change.get("dq_d", lambda o_, do_: d_true)(o64, do64)
        d_k = change.get("dk_d", lambda o_, do_: d_true)(o64, do64)
        p_q = change.get("dq_p", ref.p)
        dq = (p_q * (dp - d_q[..., None])) @ k64 * change.get("dq_scale", SCALE)
        dk = (ref.p * (dp - d_k[..., None])).transpose(-1, -2) @ q64 * change.get("dk_scale", SCALE)
        return dq.to(torch.float16), dk.to(torch.float16)

    return backward


def _read(causal: bool = True, **change):
    q, k, v, do, ref = _case(causal)
    read = dterm.read_d_term(_model(ref, q, k, **change), v, do)
    assert read is not None
    return dterm.describe_dq(read, ref.s, ref.lse, ref.allowed, k), dterm.describe_dk(read, ref.p, q)


def test_a_right_backward_reads_right_in_both_loops():
    dq, dk = _read()
    assert dq.right and dk.right


def test_d_left_out_of_the_dq_loop_reads_as_zero_there_only():
    dq, dk = _read(dq_d=lambda o, do: torch.zeros_like(o[..., 0]))
    assert dq.zero and not dq.right
    assert dk.right


def test_d_from_o_times_o_reads_as_its_factor_in_the_dk_loop():
    dq, dk = _read(dk_d=lambda o, do: (o * o).sum(-1))
    assert dq.right
    assert dk.factor is not None and abs(dk.factor - 6.5) < 0.05
    assert "rowsum(O * O)" in dterm.dk_words(dk, D)


def test_the_scale_twice_in_the_dq_loop_reads_as_sm_scale():
    dq, _ = _read(dq_scale=SCALE * SCALE)
    assert dq.factor is not None and abs(dq.factor - SCALE) < 0.01
    assert "applied once more" in dterm.dq_words(dq, D)


def test_a_dq_loop_p_from_another_rows_lse_is_one_factor_per_row():
    _, _, _, _, ref = _case()
    shifted = ref.lse.roll(3, -1)  # each row subtracts the lse of the row 3 before it
    p = torch.where(ref.allowed, torch.exp(ref.s - shifted[..., None]), torch.zeros((), dtype=torch.float64))
    dq, dk = _read(dq_p=p)
    assert dq.per_row is not None and dq.per_row[0] != dq.per_row[1]
    assert dk.right


def test_a_dq_loop_p_through_exp2_of_natural_scores_reads_as_a_slope_of_ln2():
    _, _, _, _, ref = _case()
    # exp2(s - lse): row factors aside, it grows as exp(ln2 * s)
    p = torch.where(ref.allowed, torch.exp2(ref.s - ref.lse[..., None]), torch.zeros((), dtype=torch.float64))
    dq, _ = _read(dq_p=p)
    assert dq.slope is not None and abs(dq.slope - 0.693) < 0.03


def test_a_dq_loop_p_without_the_causal_mask_reads_as_the_mask():
    _, _, _, _, ref = _case()
    p = torch.exp(ref.s - ref.lse[..., None])  # the causal lse, the mask left out
    dq, _ = _read(dq_p=p)
    assert dq.mask == "no causal mask"


def test_a_wrong_dp_term_leaves_the_d_term_probe_right():
    # the D-term probe has dP = 0: a mistake only in dP (here dP doubled) cannot show in it
    q, k, v, do, ref = _case()
    model = _model(ref, q, k)

    def doubled_dp(v_: torch.Tensor, o: torch.Tensor, do_: torch.Tensor):
        return model(2 * v_, o, do_)

    read = dterm.read_d_term(doubled_dp, v, do)
    assert read is not None
    assert dterm.describe_dq(read, ref.s, ref.lse, ref.allowed, k).right
