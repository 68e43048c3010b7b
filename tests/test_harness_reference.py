"""The reference and the wrong-answer variants of tutor/harness/problems/attention/reference.py,
checked against independent constructions: the streamed softmax against the
plain one, and every drill-01 variant against a float64 simulation of the
kernel's own loop (key blocks, -inf masking, the online update) in which the
mistake is made."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch

from tutor.harness.findings import matches, passes_as_right
from tutor.harness.problems.attention import reference

SEQS = [1, 10, 37, 64, 129]


def qkv(seq: int, head_dim: int = 16, seed: int = 0) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(seed)
    return tuple(torch.randn((1, 2, seq, head_dim), generator=generator).half() for _ in range(3))


def plain_attention(q, k, v, causal: bool) -> torch.Tensor:
    q, k, v = (t.double() for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        seq = q.shape[-2]
        scores = scores + torch.full((seq, seq), float("-inf"), dtype=torch.float64).triu(1)
    return torch.softmax(scores, dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", SEQS)
def test_the_reference_is_softmax_attention(seq: int, causal: bool):
    q, k, v = qkv(seq)
    torch.testing.assert_close(reference.attention_reference(q, k, v, causal), plain_attention(q, k, v, causal),
                               rtol=0, atol=1e-12)


@pytest.mark.parametrize("block_n", [1, 8, 64])
@pytest.mark.parametrize("seq", SEQS)
def test_streamed_softmax_with_every_switch_on_is_the_reference(seq: int, block_n: int):
    q, k, v = qkv(seq)
    streamed = reference.streamed_softmax_attention(q, k, v, block_n)
    torch.testing.assert_close(streamed, reference.attention_reference(q, k, v, causal=False), rtol=0, atol=1e-12)


def test_each_broken_switch_changes_the_answer_once_the_max_moves():
    q, k, v = qkv(129)
    right = reference.attention_reference(q, k, v, causal=False)
    for code, wrong in reference.online_variants(q, k, v, block_n=16).items():
        assert torch.isfinite(wrong).all(), code
        assert (wrong - right).abs().max() > 0.05, code


def test_with_one_block_only_the_final_division_matters():
    """A single block never moves the maximum: nothing needs rescaling."""
    q, k, v = qkv(10)
    right = reference.attention_reference(q, k, v, causal=False)
    variants = reference.online_variants(q, k, v, block_n=64)
    for code in ("never-rescaled", "sum-not-rescaled", "acc-not-rescaled"):
        torch.testing.assert_close(variants[code], right, rtol=0, atol=1e-12)
    assert (variants["no-final-division"] - right).abs().max() > 0.5


# -- drill 01: a float64 simulation of the kernel's loop -----------------------

Keep = Callable[[int, int], bool]  # (row, key) -> may the score stay?
Stages = Callable[[int], list[tuple[int, int, Keep]]]  # query block -> [(lo, hi, keep)] loops over keys


def simulate_kernel(q, k, v, block_m: int, block_n: int, stages: Stages, mask_end: bool = True) -> torch.Tensor:
    """What drill 01's kernel computes: each query block runs its loops
    ``for start_n in range(lo, hi, BLOCK_N)`` over zero-padded key blocks, sets a
    score to -inf where ``keep`` says no (and, with ``mask_end``, past the end of
    the sequence), and does the online softmax update with m starting at -inf.
    NaN appears exactly where the kernel's arithmetic makes it."""
    q, k, v = (t.double() for t in (q, k, v))
    seq, head_dim = q.shape[-2:]
    padded = -(-seq // block_n) * block_n
    k = torch.cat([k, k.new_zeros(*k.shape[:-2], padded - seq, head_dim)], dim=-2)
    v = torch.cat([v, v.new_zeros(*v.shape[:-2], padded - seq, head_dim)], dim=-2)
    out = torch.empty_like(q)
    for first_row in range(0, seq, block_m):
        rows = list(range(first_row, min(first_row + block_m, seq)))
        m = torch.full((*q.shape[:-2], len(rows)), float("-inf"), dtype=torch.float64)
        l = torch.zeros_like(m)  # noqa: E741 - the paper's name
        acc = torch.zeros(*m.shape, head_dim, dtype=torch.float64)
        for lo, hi, keep in stages(first_row // block_m):
            for start in range(lo, hi, block_n):
                cols = list(range(start, start + block_n))
                allowed = torch.tensor([[keep(r, c) and (c < seq or not mask_end) for c in cols] for r in rows])
                s = (q[..., rows, :] @ k[..., cols, :].transpose(-1, -2)) / math.sqrt(head_dim)
                s = s.masked_fill(~allowed, float("-inf"))
                m_new = torch.maximum(m, s.amax(dim=-1))
                alpha = torch.exp(m - m_new)
                p = torch.exp(s - m_new[..., None])
                l = l * alpha + p.sum(dim=-1)  # noqa: E741
                acc = acc * alpha[..., None] + p @ v[..., cols, :]
                m = m_new
        out[..., rows, :] = acc / l[..., None]
    return out


def kernel_mistakes(seq: int, block_m: int, block_n: int, causal: bool) -> dict[str, tuple[Stages, bool]]:
    """Each variant's mistake, made in the simulated kernel: its loops and masks."""
    everything: Keep = lambda r, c: True  # noqa: E731
    causal_mask: Keep = lambda r, c: c <= r  # noqa: E731

    def bound(i: int) -> int:  # TODO 1 done: stop after the query block's last row
        return min((i + 1) * block_m, seq)

    def one_loop(hi: Callable[[int], int], keep: Keep) -> Stages:
        return lambda i: [(0, hi(i), keep)]

    if not causal:
        mistakes = {
            "full-broken/causal": (one_loop(lambda i: seq, causal_mask), True),
            "full-broken/bound-only": (one_loop(bound, everything), True),
        }
        if seq % block_n:
            mistakes["ragged-unmasked"] = (one_loop(lambda i: seq, everything), False)
        return mistakes
    mistakes = {
        "todo2-open": (one_loop(lambda i: seq, everything), True),
        "diagonal-unmasked": (one_loop(bound, everything), True),
        "loop-stops-before-diagonal": (one_loop(lambda i: min(i * block_m, seq), causal_mask), True),
        "mask-off-by-one": (one_loop(bound, lambda r, c: c < r), True),
        "mask-reversed": (one_loop(bound, lambda r, c: c >= r), True),
        # tutorial 06's two stages: the blocks left of the diagonal unmasked, then the
        # diagonal block with the (reversed) mask
        "mask-reversed/diagonal-only": (
            lambda i: [(0, i * block_m, everything), (i * block_m, bound(i), lambda r, c: c >= r)],
            True,
        ),
    }
    if seq % block_n:
        mistakes["ragged-unmasked"] = (one_loop(bound, everything), False)
    return mistakes


def same_with_nan(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert torch.equal(torch.isnan(actual), torch.isnan(expected))
    defined = ~torch.isnan(expected)
    torch.testing.assert_close(actual[defined], expected[defined], rtol=0, atol=1e-10)


# (block_m, block_n): square, a query block of two key blocks (the fast kernel's
# 128 x 64), and key blocks wider than query blocks
BLOCKS = [(4, 4), (8, 4), (4, 8)]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("seq", [1, 10, 16, 23])
@pytest.mark.parametrize("blocks", BLOCKS, ids=lambda b: f"{b[0]}x{b[1]}")
def test_each_drill_01_variant_is_the_kernel_with_that_mistake(blocks, seq: int, causal: bool):
    block_m, block_n = blocks
    q, k, v = qkv(seq, head_dim=8, seed=seq)
    variants = reference.causal_variants(q, k, v, block_m, block_n, causal)
    mistakes = kernel_mistakes(seq, block_m, block_n, causal)
    if block_m % block_n:
        # a two-stage loop needs whole key blocks left of the diagonal: no such kernel
        mistakes.pop("mask-reversed/diagonal-only", None)
        variants.pop("mask-reversed/diagonal-only", None)
    assert set(variants) == set(mistakes)
    for code, (stages, mask_end) in mistakes.items():
        simulated = simulate_kernel(q, k, v, block_m, block_n, stages, mask_end)
        same_with_nan(variants[code], simulated)


@pytest.mark.parametrize("seq", [10, 23])
def test_the_correct_kernel_simulated_is_the_reference(seq: int):
    """The simulation itself is right when no mistake is made."""
    q, k, v = qkv(seq, head_dim=8)
    causal_kernel = lambda i: [(0, min((i + 1) * 4, seq), lambda r, c: c <= r)]  # noqa: E731
    full_kernel = lambda i: [(0, seq, lambda r, c: True)]  # noqa: E731
    for kernel, causal in ((causal_kernel, True), (full_kernel, False)):
        simulated = simulate_kernel(q, k, v, 4, 4, kernel)
        torch.testing.assert_close(simulated, reference.attention_reference(q, k, v, causal))


# -- matching a student's output against a variant -----------------------------


def test_matching_ignores_rows_the_variant_leaves_undefined():
    expected = torch.tensor([[float("nan"), float("nan")], [1.0, 2.0]], dtype=torch.float64)
    assert matches(torch.tensor([[0.0, 0.0], [1.0, 2.01]]), expected, tolerance=0.02)
    assert matches(torch.tensor([[float("nan")] * 2, [1.0, 2.0]]), expected, tolerance=0.02)
    assert not matches(torch.tensor([[0.0, 0.0], [1.0, 2.1]]), expected, tolerance=0.02)
    assert not matches(torch.tensor([[0.0, 0.0], [float("nan"), 2.0]]), expected, tolerance=0.02)


def test_an_all_nan_variant_matches_only_an_all_nonfinite_output():
    expected = torch.full((2, 2), float("nan"), dtype=torch.float64)
    assert matches(torch.full((2, 2), float("inf")), expected, tolerance=0.02)
    assert not matches(torch.tensor([[float("nan"), 1.0], [float("nan")] * 2]), expected, tolerance=0.02)


def test_large_wrong_outputs_match_within_fp16_rounding():
    """A missing final division leaves values in the tens: fp16 alone rounds 40.01 to 40.0."""
    expected = torch.tensor([40.013, -25.3], dtype=torch.float64)
    assert matches(expected.half(), expected, tolerance=0.02)
    assert not matches(expected.half() + 1.0, expected, tolerance=0.02)


def test_a_variant_that_would_fail_the_case_is_not_taken_for_the_right_answer():
    """The fingerprint's relative slack must not call a mistake's variant "as good as
    right" where the case's own absolute check fails it (drill 05, seed 223: off by 0.0224
    against 0.02 on values of 0.57 once hid reads-past-length's model)."""
    right = torch.tensor([[0.57, -0.3, 0.1]], dtype=torch.float64)
    variant = right + torch.tensor([[0.0225, 0.0, 0.0]], dtype=torch.float64)
    assert matches(variant, right, 0.02)  # within the slack that absorbs fp16 rounding of large values
    assert not passes_as_right(variant, right, 0.02)  # but the case's check fails it
    assert passes_as_right(right + 0.019, right, 0.02)
    right[0, 1] = float("nan")  # a row the reference leaves undefined is ignored, as by matches
    assert passes_as_right(right.nan_to_num(nan=5.0), right, 0.02)
