"""readout.other_head_words: where each wrong head's whole output equals attention with
another head's query, K/V, K or V, it says which; otherwise nothing (no kernel: the
reference on plain tensors is the measured output)."""

from __future__ import annotations

import torch

from tutor.harness.problems.attention import readout


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    q, k, v = (t.to(torch.float64) for t in (q, k, v))
    return torch.softmax(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1) @ v


def _inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return tuple(torch.randn(2, 3, 16, 8, generator=g) for _ in range(3))  # type: ignore[return-value]


def test_each_swapped_input_is_named_with_its_heads():
    q, k, v = _inputs()
    pick = torch.tensor([0, 0, 2])  # head 1 reads head 0's tensor
    for what, out, pointer in (
        ("query and its own K/V", attend(q[:, pick], k, v), "q pointer"),
        ("K/V and its own query", attend(q, k[:, pick], v[:, pick]), "K and V pointers"),
        ("K and its own query and V", attend(q, k[:, pick], v), "K pointer"),
        ("V and its own query and K", attend(q, k, v[:, pick]), "V pointer"),
    ):
        said = readout.other_head_words(out, attend(q, k, v), q, k, v, attend, 0.02)
        assert f"another head's {what} (head 1: head 0's)" in said and pointer in said, (what, said)


def test_a_right_output_or_one_no_swap_explains_says_nothing():
    q, k, v = _inputs()
    assert readout.other_head_words(attend(q, k, v), attend(q, k, v), q, k, v, attend, 0.02) == ""
    wrong = attend(q, k, v) * 1.5  # every head off, and no other head's input explains it
    assert readout.other_head_words(wrong, attend(q, k, v), q, k, v, attend, 0.02) == ""
