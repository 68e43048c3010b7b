"""What the drills' words claim about the mistakes they name, held against a float64
computation of those mistakes (issue 21: what the tutor teaches is true)."""

from __future__ import annotations

import math

import numpy as np
import torch

from tutor.catalog import get_drill
from tutor.harness.problems.attention import reference
from tutor.quiz.model import paragraph

# Issue 21's example: one row, two blocks of four keys; the row's maximum (5) is in block 0.
BLOCKS = (np.array([5.0, 0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0, 1.0]))


def block_masses(weights_per_block: list[np.ndarray]) -> np.ndarray:
    masses = np.array([w.sum() for w in weights_per_block])
    return masses / masses.sum()


def test_never_rescaled_underweights_the_block_holding_the_maximum():
    row_max = max(b.max() for b in BLOCKS)
    true = block_masses([np.exp(b - row_max) for b in BLOCKS])
    # drill 02 as shipped: each block against its own maximum, never rescaled
    shipped = block_masses([np.exp(b - b.max()) for b in BLOCKS])
    np.testing.assert_allclose(true, [0.933, 0.067], atol=5e-4)
    np.testing.assert_allclose(shipped, [0.203, 0.797], atol=5e-4)
    ratios = shipped / true
    assert ratios[0] < 1 < ratios[1], "the block holding the maximum is under-weighted, the other over"
    # relative to the maximum's block, every other block is over-weighted by exp(M - m_block)
    for ratio, block in zip(ratios, BLOCKS, strict=True):
        assert math.isclose(ratio / ratios[0], math.exp(row_max - block.max()), rel_tol=1e-12)

    message = paragraph(get_drill("02").diagnosis_text("never-rescaled").message)
    assert "block holding the row's maximum is under-weighted" in message
    assert "every other block is over-weighted by exp(M - m_block)" in message
    assert "largest scores is over-weighted" not in message


def test_the_harness_model_of_the_shipped_update_agrees():
    """tutor/harness/problems/attention/reference.py's float64 model of drill 02 as shipped gives the same masses."""
    scores = np.concatenate(BLOCKS)
    seq = len(scores)
    q = torch.ones((1, 1, seq, 1), dtype=torch.float64)  # head_dim 1: the scale is 1, q·k = k
    k = torch.tensor(scores, dtype=torch.float64).reshape(1, 1, seq, 1)
    v = torch.eye(seq, dtype=torch.float64).reshape(1, 1, seq, seq)  # one-hot values: the output is the weights
    # (head_dim of v differs from q's: the stream reads head_dim from q only for the scale)
    weights = reference.streamed_softmax_attention(q, k, v, block_n=4, running_max=False)[0, 0, 0].numpy()
    shipped = block_masses([weights[:4], weights[4:]])
    np.testing.assert_allclose(shipped, block_masses([np.exp(b - b.max()) for b in BLOCKS]), rtol=1e-12)
