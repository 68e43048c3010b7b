"""Drill 03's formulas against independent computations.

The byte counts are checked against an explicit list of the HBM passes each
path makes (sized with numpy's own dtype sizes), the FLOPs against PyTorch's
FLOP counter running real attention, the budget lengths against a search, and
the causal block counts against a real causal mask.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from tutor.quiz import formulas as f

SHAPES = [(1024, 128), (4096, 128), (16384, 128), (1000, 64), (3000, 96), (65536, 256), (7, 3)]
DTYPES = [np.float16, np.float32, np.float64]


def passes_bytes(passes: list[tuple[str, tuple[int, int]]], dtype) -> int:
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for _, shape in passes)


def naive_passes(n: int, d: int) -> list[tuple[str, tuple[int, int]]]:
    return [
        ("read Q", (n, d)), ("read K", (n, d)), ("write S", (n, n)),
        ("read S", (n, n)), ("write P", (n, n)),
        ("read P", (n, n)), ("read V", (n, d)), ("write O", (n, d)),
    ]


def fused_passes(n: int, d: int) -> list[tuple[str, tuple[int, int]]]:
    return [("read Q", (n, d)), ("read K", (n, d)), ("read V", (n, d)), ("write O", (n, d))]


@pytest.mark.parametrize("n,d", SHAPES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_traffic_matches_the_list_of_passes(n, d, dtype):
    b = np.dtype(dtype).itemsize
    assert f.naive_hbm_bytes(n, d, b) == passes_bytes(naive_passes(n, d), dtype)
    assert f.fused_hbm_bytes(n, d, b) == passes_bytes(fused_passes(n, d), dtype)
    assert f.traffic_ratio(n, d) == Fraction(passes_bytes(naive_passes(n, d), dtype),
                                             passes_bytes(fused_passes(n, d), dtype))


@pytest.mark.parametrize("n,d", SHAPES)
def test_the_ratio_is_exactly_one_plus_n_over_d(n, d):
    assert f.traffic_ratio(n, d) == 1 + Fraction(n, d)


def test_headline_numbers():
    assert f.traffic_ratio(16384, 128) == 129
    assert f.naive_hbm_bytes(16384, 128, 2) == 2_164_260_864
    assert f.fused_hbm_bytes(16384, 128, 2) == 16 * 2**20
    assert f.forward_flops(16384, 128) == 137_438_953_472
    assert f.naive_intensity(16384, 128, 2) == Fraction(8192, 129)
    assert f.naive_intensity_limit(128, 2) == 64  # d/2 for fp16


@pytest.mark.parametrize("d,b", [(64, 2), (128, 2), (128, 4), (256, 1)])
def test_naive_intensity_rises_to_d_over_b_and_never_passes_it(d, b):
    lengths = [2**k for k in range(4, 31)]
    values = [f.naive_intensity(n, d, b) for n in lengths]
    assert all(a < c for a, c in itertools.pairwise(values))
    assert all(v < Fraction(d, b) for v in values)
    assert f.naive_intensity_limit(d, b) == Fraction(d, b)
    assert float(Fraction(d, b) - values[-1]) < 1e-6 * d
    # the same number written through the ratio: (d/b)(1 - 1/r)
    for n in lengths:
        assert f.naive_intensity(n, d, b) == Fraction(d, b) * (1 - 1 / f.traffic_ratio(n, d))


@pytest.mark.parametrize("n,d", [(64, 16), (200, 32), (96, 64)])
def test_flops_match_torchs_flop_counter_on_real_attention(n, d):
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = (torch.randn(n, d, dtype=torch.float64) for _ in range(3))
    with FlopCounterMode(display=False) as naive:
        scores = q @ k.T
        probabilities = torch.softmax(scores / math.sqrt(d), dim=-1)
        probabilities @ v
    assert naive.get_total_flops() == f.forward_flops(n, d)


def longest_by_search(budget: int, per_n2: int) -> int:
    low, high = 0, 1
    while high * high * per_n2 <= budget:
        high *= 2
    while high - low > 1:  # invariant: low fits, high does not
        middle = (low + high) // 2
        if middle * middle * per_n2 <= budget:
            low = middle
        else:
            high = middle
    return low


@pytest.mark.parametrize("budget", [50 * 10**6, 50 * 2**20, 60 * 10**6, 80 * 10**9, 141 * 10**9, 143771 * 2**20, 99])
@pytest.mark.parametrize("b,matrices", [(2, 1), (4, 1), (1, 1), (2, 256), (2, 8 * 64)])
def test_longest_fitting_sequence_matches_a_search(budget, b, matrices):
    n = f.longest_fitting_sequence(budget, b, matrices)
    assert n == longest_by_search(budget, b * matrices)
    assert f.score_matrix_bytes(n + 1, b, matrices) > budget
    if n:
        assert f.score_matrix_bytes(n, b, matrices) <= budget


def test_budget_headlines():
    assert f.longest_fitting_sequence(50_000_000, 2) == 5000  # 5000² × 2 is exactly 50 MB
    assert f.longest_fitting_sequence(80 * 10**9, 2, 8 * 32) == 12_500


@pytest.mark.parametrize("n,block", [(1000, 64), (200, 64), (256, 64), (130, 16), (64, 64), (1, 32), (513, 128)])
def test_causal_block_count_matches_a_real_mask(n, block):
    allowed = np.tril(np.ones((n, n), dtype=bool))
    t = -(-n // block)
    pad = t * block - n
    padded = np.pad(allowed, ((0, pad), (0, pad)))
    # a block is visited when any (row, key) pair in it is allowed
    visited = padded.reshape(t, block, t, block).any(axis=(1, 3)).sum()
    assert f.causal_block_count(n, block) == (visited, t * t)
    assert f.causal_visited_fraction(n, block) == Fraction(int(visited), t * t)


def test_drill_01_shape_visits_136_of_256_blocks():
    assert f.causal_block_count(1000, 64) == (136, 256)
    assert f.causal_visited_fraction(1000, 64) == Fraction(17, 32)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_formulas_refuse_non_positive_or_non_integer_sizes(bad):
    with pytest.raises(ValueError):
        f.naive_hbm_bytes(bad, 128, 2)
    with pytest.raises(ValueError):
        f.longest_fitting_sequence(50_000_000, bad)


def test_block_sparse_flops_count_listed_tiles_of_a_causal_block_mask():
    """Drill 09's quiz: pair by pair, the tiles a causal BlockMask lists (some pair on or
    below the diagonal), each 4·b²·d FLOPs; a share of (T+1)/(2T) of dense at a whole-tile N."""
    for n, b, d in ((8192, 128, 128), (1000, 64, 64), (100, 32, 16)):
        t = -(-n // b)
        listed = sum(1 for i in range(t) for j in range(t) if j * b <= min((i + 1) * b, n) - 1)
        assert f.causal_block_sparse_flops(n, b, d) == listed * 4 * b * b * d
    assert f.causal_block_sparse_flops(8192, 128, 128) == 2080 * 4 * 128 * 128 * 128
    assert f.causal_block_sparse_flops(8192, 128, 128) / f.forward_flops(8192, 128) == (64 + 1) / (2 * 64)
