"""Drill 04's dQ-loop dS read-out (one-hot K through dQ,
``tutor.harness.problems.backward_readout.describe_ds``): what each measured dS is
said to be, on dQ built in plain PyTorch from a known dS, and once through the
real harness on a kernel whose dQ loop subtracts D on the wrong axis."""

from __future__ import annotations

import pytest
import torch
from helpers_harness import REPO

from tutor.catalog import get_drill
from tutor.harness.problems import backward_readout as readout
from tutor.loop.runner import CheckRunner

SEQ, HEAD_DIM = 37, 64


def _inputs(causal: bool, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q, v, do = (torch.randn(1, 2, SEQ, HEAD_DIM, generator=g, dtype=torch.float64) for _ in range(3))
    k = readout.one_hot_k(torch.zeros(1, 2, SEQ, HEAD_DIM, dtype=torch.float64))
    idx = torch.arange(SEQ)
    allowed = idx[:, None] >= idx[None, :] if causal else torch.ones(SEQ, SEQ, dtype=torch.bool)
    s = q @ k.transpose(-1, -2) * HEAD_DIM**-0.5
    p = torch.softmax(s.masked_fill(~allowed, float("-inf")), -1)
    dp = do @ v.transpose(-1, -2)
    d = (do * (p @ v)).sum(-1)
    return q, k, v, do, allowed, s, p, dp, d


def _dq_for(ds: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """The dQ a loop with this dS gives (dq = sm_scale dS K), stored in fp16 as a kernel does."""
    return (ds @ k * HEAD_DIM**-0.5).to(torch.float16)


@pytest.mark.parametrize("causal", [False, True])
def test_the_right_ds_is_said_right(causal):
    q, k, v, do, allowed, s, p, dp, d = _inputs(causal)
    shape = readout.describe_ds(_dq_for(p * (dp - d[..., None]), k), q, k, v, do, allowed)
    assert shape.right and "is right" in shape.words


@pytest.mark.parametrize(("make", "said"), [
    (lambda s, p, dp, d, allowed: (dp - d[..., None]) * allowed, "it is not multiplied by P"),
    (lambda s, p, dp, d, allowed: p * dp, "D is not subtracted"),
    (lambda s, p, dp, d, allowed: p * (dp - 2 * d[..., None]), "subtracts 2 x rowsum(dO * O) as D"),
    (lambda s, p, dp, d, allowed: p * (dp - d[..., None, :]), "D is broadcast on the wrong axis"),
    (lambda s, p, dp, d, allowed: 0.125 * p * (dp - d[..., None]), "is 0.125 x P * (dP - D)"),
    (lambda s, p, dp, d, allowed: p * (dp.transpose(-1, -2) - d[..., None]), "its dP is transposed"),
])
@pytest.mark.parametrize("causal", [False, True])
def test_each_term_is_named_from_the_measured_ds(make, said, causal):
    q, k, v, do, allowed, s, p, dp, d = _inputs(causal)
    shape = readout.describe_ds(_dq_for(make(s, p, dp, d, allowed), k), q, k, v, do, allowed)
    assert not shape.right and said in shape.words, shape.words


@pytest.mark.parametrize("name", ["K", "Q", "dO"])
def test_a_dp_made_from_another_operand_than_v_is_named(name):
    """dP = dO Kᵀ in the dQ loop (blind round 18, 04/w20: a k typed for v)."""
    q, k, v, do, allowed, s, p, dp, d = _inputs(False)
    other = {"K": k, "Q": q, "dO": do}[name]
    shape = readout.describe_ds(_dq_for(p * (do @ other.transpose(-1, -2) - d[..., None]), k), q, k, v, do, allowed)
    assert f"its dP is dO {name}ᵀ where it is dO Vᵀ" in shape.words, shape.words


def test_a_p_of_another_temperature_is_measured():
    q, k, v, do, allowed, s, p, dp, d = _inputs(False)
    p2 = torch.softmax(s * 0.5, -1)  # exp2 of natural-log scores, say: P grows as exp(0.5 s)... renormalised
    shape = readout.describe_ds(_dq_for(p2 * (dp - d[..., None]), k), q, k, v, do, allowed)
    assert "exp(0.5 s)" in shape.words, shape.words


def test_an_unmasked_causal_ds_is_the_mask():
    q, k, v, do, allowed, s, p, dp, d = _inputs(True)
    full = torch.softmax(s, -1)
    shape = readout.describe_ds(_dq_for(full * (dp - (do * (full @ v)).sum(-1)[..., None]), k), q, k, v, do, allowed)
    assert "pairs a row may not see (keys after the row)" in shape.words, shape.words


def test_noise_is_said_as_a_size_never_as_a_cause():
    q, k, v, do, allowed, s, p, dp, d = _inputs(False)
    noise = torch.randn(p.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    shape = readout.describe_ds(_dq_for(p * (dp - d[..., None]) + 0.3 * noise, k), q, k, v, do, allowed)
    assert "in no way the tutor can single out" in shape.words
    for cause in ("not multiplied by P", "D is not subtracted", "wrong axis", "another scale or base", "mask"):
        assert cause not in shape.words


def test_keys_added_twice_are_counted_per_key():
    """A dQ loop stepping 32 keys with a 64-key tile adds keys 32..36 twice (a blind attempt)."""
    q, k, v, do, allowed, s, p, dp, d = _inputs(False)
    twice = torch.ones(SEQ, dtype=torch.float64)
    twice[32:] = 2.0
    shape = readout.describe_ds(_dq_for(p * (dp - d[..., None]) * twice, k), q, k, v, do, allowed)
    assert "1 x on keys 0..31; 2 x on keys 32..36 (of 37)" in shape.words, shape.words


@pytest.mark.parametrize("block", [SEQ, 16])
def test_p_normalised_per_row_or_per_block_is_one_factor_per_row_or_block(block):
    """P = exp(s - the block's own maximum) (a blind attempt: the tile maximum in place of lse)."""
    q, k, v, do, allowed, s, p, dp, d = _inputs(False)
    pad = -SEQ % block
    tiles = torch.nn.functional.pad(s, (0, pad), value=float("-inf")).reshape(*s.shape[:-1], -1, block)
    tile_max = tiles.amax(-1, keepdim=True).expand_as(tiles).reshape(*s.shape[:-1], -1)[..., :SEQ]
    shape = readout.describe_ds(_dq_for(torch.exp(s - tile_max) * (dp - d[..., None]), k), q, k, v, do, allowed)
    unit = "one factor per row" if block == SEQ else "one factor per (row, block of 16 keys)"
    assert unit in shape.words, shape.words


@pytest.mark.slow
def test_a_dq_loop_with_d_on_the_wrong_axis_is_named_through_the_harness(tmp_path):
    drill = get_drill("04")
    text = (REPO / "solutions" / drill.solution).read_text()
    right = "        ds = p * (dp - delta[:, None])\n        # dQ += dS K\n"
    assert text.count(right) == 1
    file = tmp_path / drill.file
    file.write_text(text.replace(right, "        ds = p * (dp - delta[None, :])\n        # dQ += dS K\n"))
    with CheckRunner(device="cpu", warm=False) as runner:  # a real worker, through the interpreter
        result = runner.check(drill.id, file, seed=0)
    assert result.outcome == "failed"
    said = {d.code: d.message for d in result.diagnosis}
    assert "dq-wrong" in said, said
    # the exact closed form: row i, key j of a tile takes the D of the query block's row j mod BLOCK_N
    assert "with D read broadcast along the wrong axis" in said["dq-wrong"], said["dq-wrong"]
