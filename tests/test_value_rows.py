"""tutor.harness.problems.attention.value_rows: a read-out's weights moved off their keys'
value rows, or missing where values read 0, are told from a window moved or narrowed."""

from __future__ import annotations

import torch

from tutor.harness.problems.attention import value_rows

SEQ, WINDOW = 40, 6


def _probs(shift_mask: int = 0) -> torch.Tensor:
    """Softmax of random small scores over a window r - WINDOW < c - shift_mask <= r, (2, SEQ, SEQ)."""
    g = torch.Generator().manual_seed(0)
    scores = 0.3 * torch.randn(2, SEQ, SEQ, generator=g, dtype=torch.float64)
    r, c = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None, :] - shift_mask
    allowed = (c <= r) & (c > r - WINDOW)
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)


def test_weights_moved_one_value_row_later_are_found_with_their_shift():
    probs = _probs()
    moved = value_rows.shifted(probs, 1)
    assert value_rows.shifted_values(moved, probs, 64) == 1
    assert value_rows.shifted_values(value_rows.shifted(probs, -3), probs, 64) == -3
    assert value_rows.shifted_values(probs, probs, 64) is None  # in place: nothing moved


def test_a_window_one_key_late_is_not_taken_for_moved_values():
    """The mask one key late (r - WINDOW + 1 < c <= r + 1) renormalises over other keys: their
    weights follow their own scores, not the scores of the keys one before."""
    assert value_rows.shifted_values(_probs(shift_mask=1), _probs(), 64) is None


def test_values_read_as_zero_are_told_from_keys_the_mask_removed():
    probs = _probs()
    dropped = probs.clone()
    dropped[:, 30:, 27:30] = 0.0  # keys 27..29 read as 0 for rows 30.. (not renormalised)
    rows = value_rows.dropped_values(dropped, probs)
    assert rows and all(r % SEQ >= 30 for r in rows)
    assert "keys 27..29" in value_rows.dropped_words(dropped, probs, rows)
    removed = probs.clone()
    removed[:, 30:, 27:30] = 0.0
    removed = removed / removed.sum(-1, keepdim=True)  # a mask that removed them: the rest renormalised
    assert value_rows.dropped_values(removed, probs) == []


def test_nearly_even_weights_rounded_to_fp16_still_give_their_shift():
    """The read-out's weights are nearly even (small scores) and the kernel's output is fp16:
    two keys' weights round to one value, so their largest alone cannot place the shift."""
    g = torch.Generator().manual_seed(1)
    scores = 5e-4 * torch.randn(2, SEQ, SEQ, generator=g, dtype=torch.float64)
    r, c = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None, :]
    allowed = (c <= r) & (c > r - 16)
    probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1).nan_to_num(0.0)
    moved = value_rows.shifted(probs, -5).half().double()  # what an fp16 output reads out
    assert value_rows.shifted_values(moved, probs, 64) == -5
