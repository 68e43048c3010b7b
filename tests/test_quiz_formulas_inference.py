"""The backward, decode, KV-cache and sliding-window formulas against independent
computations: PyTorch's FLOP counter on a real backward, the bytes of real
tensors, and a real sliding-window mask tiled into blocks."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tutor.quiz import formulas as f


@pytest.mark.parametrize("n,d", [(64, 16), (100, 32), (37, 8)])
def test_backward_flops_are_autograds_plus_the_recomputed_scores(n, d):
    """Autograd keeps P and does four matmuls (dQ, dK, dP, dV); a flash backward
    does those and recomputes S = QKᵀ: one forward matmul more."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    q, k, v = (torch.randn(n, d, dtype=torch.float64, requires_grad=True) for _ in range(3))
    scores = q @ k.T
    out = torch.softmax(scores / math.sqrt(d), dim=-1) @ v
    with FlopCounterMode(display=False) as backward:
        out.backward(torch.randn(n, d, dtype=torch.float64))
    with FlopCounterMode(display=False) as recompute:
        q.detach() @ k.detach().T
    assert f.backward_flops(n, d) == backward.get_total_flops() + recompute.get_total_flops()
    assert Fraction(f.backward_flops(n, d), f.forward_flops(n, d)) == f.backward_flops_ratio() == Fraction(5, 2)


@pytest.mark.parametrize("n,d,dtype", [(1024, 64, "float16"), (300, 128, "bfloat16"), (77, 32, "float32")])
def test_backward_reads_are_the_bytes_of_its_inputs(n, d, dtype):
    torch = pytest.importorskip("torch")
    dt = getattr(torch, dtype)
    inputs = [torch.empty(n, d, dtype=dt) for _ in ("q", "k", "v", "o", "do")]
    lse = torch.empty(n, dtype=torch.float32)
    read = sum(t.numel() * t.element_size() for t in (*inputs, lse))
    b = inputs[0].element_size()
    assert f.backward_read_bytes(n, d, b) == read
    assert f.stored_p_bytes(n, b) == torch.empty(n, n, dtype=dt).numel() * b


@pytest.mark.parametrize("layers,heads,kv_heads,d,b", [(32, 32, 8, 128, 2), (80, 64, 8, 128, 2), (1, 4, 4, 64, 4)])
def test_kv_cache_bytes_are_the_bytes_of_a_real_cache(layers, heads, kv_heads, d, b):
    tokens = 3
    dtype = {1: np.int8, 2: np.float16, 4: np.float32}[b]
    cache = [np.empty((2, tokens, kv_heads, d), dtype=dtype) for _ in range(layers)]  # K and V per layer
    assert f.kv_bytes_per_token(kv_heads, d, b, layers) * tokens == sum(c.nbytes for c in cache)
    assert f.gqa_saving(heads, kv_heads) == Fraction(f.kv_bytes_per_token(heads, d, b, layers),
                                                     f.kv_bytes_per_token(kv_heads, d, b, layers))


def test_decode_intensity_counts_each_query_head_against_shared_bytes():
    # 32 query heads on 8 K/V heads, fp16: 32 × 4·d FLOPs over 2 × 8 × d × 2 bytes
    assert f.decode_intensity(32, 8, 2) == Fraction(32 * 4 * 128, 2 * 8 * 128 * 2) == 4
    assert f.decode_intensity(32, 32, 2) == 1  # multi-head attention in fp16: one FLOP per byte
    assert f.decode_intensity(64, 8, 1) == 16
    with pytest.raises(ValueError):
        f.decode_intensity(30, 8, 2)


@pytest.mark.parametrize("n,window,block",
                         [(256, 64, 32), (300, 100, 32), (200, 1, 16), (130, 500, 64), (1000, 257, 64)])
def test_window_block_count_matches_a_real_mask(n, window, block):
    rows, cols = np.arange(n)[:, None], np.arange(n)[None, :]
    allowed = (cols <= rows) & (cols > rows - window)
    t = -(-n // block)
    padded = np.zeros((t * block, t * block), dtype=bool)
    padded[:n, :n] = allowed
    touched = padded.reshape(t, block, t, block).any(axis=(1, 3))
    assert f.window_block_count(n, window, block) == (int(touched.sum()), t * t)


def test_window_headline_and_its_limits():
    assert f.window_block_count(4096, 1024, 64) == (952, 4096)
    assert f.window_visited_fraction(1000, 10**6, 64) == f.causal_visited_fraction(1000, 64)  # W >= N: causal
    assert f.window_block_count(128, 1, 64) == (2, 4)  # the diagonal blocks alone


def test_a_decode_step_reads_the_cache_once_per_kv_head_packed_and_once_per_query_head_unpacked():
    # 8 sequences of 8192 tokens, 32 query heads on 8 K/V heads, d = 128, fp16
    packed = f.decode_step_kv_bytes(8, 8192, 8, 128, 2)
    assert packed == 2 * 8 * 8192 * 8 * 128 * 2 == 268_435_456  # 256 MiB
    assert f.decode_step_kv_bytes(8, 8192, 8, 128, 2, reads_per_kv_head=4) == 4 * packed
    with pytest.raises(ValueError):
        f.decode_step_kv_bytes(8, 0, 8, 128, 2)
