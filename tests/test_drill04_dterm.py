"""Drill 04's D-term probe (V = 0, one-hot dO, so dP = 0 and D = 2) on backwards written
in plain float64 PyTorch with one term changed on purpose (no kernel): what each loop's
read-out measures, and that a right backward reads as right."""

from __future__ import annotations

import pytest
import torch
from helpers_harness import REPO

from tutor.catalog import get_drill
from tutor.harness.problems import attention_backward as bwd
from tutor.harness.problems import backward_ds_readout as dterm
from tutor.loop.runner import CheckRunner

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


def _per_head(**change):
    """The per-head probe's factors of each loop (dO scaled by n + 1 on program n)."""
    q, k, v, do, ref = _case()
    read = dterm.read_d_term(_model(ref, q, k, **change), v, do, per_head=True)
    assert read is not None
    scales = dterm.head_scale(do).reshape(-1).to(torch.float64)
    rows = torch.tensor(read.rows)
    dq = dterm.head_factors(read.dq[:, rows], dterm.dq_model(read, ref.s, ref.lse, ref.allowed, k), scales)
    dk = dterm.head_factors(read.dk, dterm.dk_model(read, ref.p, q), scales)
    return dq, dk


def test_the_per_head_probe_reads_every_program_as_its_own_on_a_right_backward():
    dq, dk = _per_head()
    assert dq is not None and dk is not None
    assert all(abs(a - 1) < 0.01 for a in dq + dk)
    assert dterm.heads_words(dq, "dQ") == "" and dterm.heads_words(dk, "dK") == ""


def test_a_d_read_from_head_0_is_named_by_the_per_head_probe_and_hidden_from_the_plain_one():
    """Every program using head 0's D (a D load without its head offset): with D = 2 on every
    head the plain probe cannot tell (it reads right); D scaled per head shows 1/2 on head 1."""
    head0 = lambda o, do: ((do * o).sum(-1))[:, :1].expand(-1, o.shape[1], -1)  # noqa: E731
    dq_plain, _ = _read(dq_d=head0)
    assert dq_plain.right
    dq, dk = _per_head(dq_d=head0)
    assert dq is not None and abs(dq[0] - 1) < 0.01 and abs(dq[1] - 0.5) < 0.01
    assert dk is not None and all(abs(a - 1) < 0.01 for a in dk)
    assert "program 1: 0.5x, what program 0's D gives" in dterm.heads_words(dq, "dQ")


@pytest.mark.slow
def test_a_dq_loop_reading_head_0s_d_is_named_through_the_harness(tmp_path):
    """The real harness on a kernel whose dQ loop loads D without its (batch, head) offset:
    the plain probe (D = 2 on every head) would call the dQ loop's D right and blame dP;
    the per-head probe says which program's D it used."""
    drill = get_drill("04")
    text = (REPO / "solutions" / drill.solution).read_text()
    head, dq_kernel = text.split("def _bwd_dq(")  # the dQ loop's kernel only
    right = "delta = tl.load(Delta + row_base + rows, mask=row_ok, other=0.0)"
    assert dq_kernel.count(right) == 1
    file = tmp_path / drill.file
    wrong = "delta = tl.load(Delta + rows, mask=row_ok, other=0.0)"  # no row_base: head 0's D
    file.write_text(head + "def _bwd_dq(" + dq_kernel.replace(right, wrong))
    with CheckRunner(device="cpu", warm=False) as runner:  # a real worker, through the interpreter
        result = runner.check(drill.id, file, seed=0, timing=False)
    said = {d.code: d.message for d in result.diagnosis}
    assert result.outcome == "failed" and "dq-wrong" in said, said
    assert "what program 0's D gives" in said["dq-wrong"] and "dP = dO V^T term" not in said["dq-wrong"]
