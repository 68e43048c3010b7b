"""Blind round 21's read-outs on hand-built weights and scores (no kernel): each says its
pattern where it holds and nothing where the weights are right or another mistake's.
The kernels with exactly these mistakes are in the drills' mistakes files
(tests/test_blind_round_words.py asserts their words through the real harness)."""

from __future__ import annotations

import torch

from tutor.harness.problems.attention.hostile import FP16_UNDERFLOW_GAP, max_over_unseen_keys
from tutor.harness.problems.block_sparse import build_block_mask
from tutor.harness.problems.block_sparse_readout import index_as_position_words, mask_misread
from tutor.harness.problems.varlen_attention import Extra

SEQ, BLOCK = 64, 16


def _block_mask():
    gen = torch.Generator().manual_seed(0)
    rows, cols = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None, :]
    mask = (cols <= rows) & (torch.rand(SEQ, SEQ, generator=gen) < 0.7) | (cols == rows)
    return build_block_mask(mask.to(torch.int8), BLOCK, BLOCK, "cpu")


def _kinds(bm) -> torch.Tensor:
    idx = torch.arange(SEQ)
    return bm.kinds()[idx // BLOCK][:, idx // BLOCK]


def _equal_shares(counts: torch.Tensor) -> torch.Tensor:
    return (counts / counts.sum(dim=-1, keepdim=True).clamp_min(1.0))[None]


def test_an_element_mask_read_another_way_is_named_and_a_right_one_is_not():
    """Blind rounds 21 and 28 (09 b mask_transposed, mask_local_rows): the keys weighed in the partial
    blocks are exactly the mask's inverted, transposed, or read at query block 0's rows."""
    bm = _block_mask()
    kind = _kinds(bm)
    partial, seen = kind == 1, bm.mask != 0
    assert bool(partial.any())
    idx = torch.arange(SEQ)
    for other, words in ((~seen, "the wrong way round"), (seen.T, "read transposed"),
                         (seen[idx % BLOCK], "query block 0's rows")):
        assert words in mask_misread(((kind == 2) | (partial & other))[None], kind, bm.mask, BLOCK, BLOCK)
    assert mask_misread(bm.allowed()[None], kind, bm.mask, BLOCK, BLOCK) == ""
    # every key of a partial block weighed (the mask not applied): no reading of the mask
    assert mask_misread(((kind == 2) | partial)[None], kind, bm.mask, BLOCK, BLOCK) == ""


def test_an_index_used_as_a_key_position_is_named_where_every_row_fits():
    bm = _block_mask()
    mask = bm.mask != 0
    counts = torch.zeros(SEQ, SEQ, dtype=torch.float64)
    for i in range(bm.kv_indices.shape[0]):
        rows = slice(i * BLOCK, (i + 1) * BLOCK)
        for j in bm.full_kv_indices[i, : int(bm.full_kv_num_blocks[i])].tolist():
            counts[rows, j:j + BLOCK] += 1.0
        for j in bm.kv_indices[i, : int(bm.kv_num_blocks[i])].tolist():
            counts[rows, j:j + BLOCK] += mask[rows, j:j + BLOCK].double()
    right = _equal_shares(bm.allowed().double())[0]  # softmax's with every score 0
    words = index_as_position_words(_equal_shares(counts), bm, right)
    assert f"reads listed block j as keys j..j+{BLOCK - 1}" in words
    assert index_as_position_words(right[None], bm, right) == ""  # the right weights
    moved = counts.roll(1, dims=-1)  # another wrong pattern: not this one
    assert index_as_position_words(_equal_shares(moved), bm, right) == ""


def _window_scores(window: int, far: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores of one head, each row's visible keys near 0; in each row of ``far``, the key just
    older than its window (same K/V block as the window's edge) far above them."""
    rows, cols = torch.arange(SEQ)[:, None], torch.arange(SEQ)[None, :]
    seen = (cols <= rows) & (cols > rows - window)
    s = torch.zeros(1, SEQ, SEQ, dtype=torch.float64)
    for r in far:
        s[0, r, r - window] = FP16_UNDERFLOW_GAP + 20
    return s, seen


def test_a_maximum_over_keys_older_than_the_window_is_named_only_where_the_wrong_rows_are_those():
    window = 12
    far = [r for r in range(window, SEQ) if (r - window) // BLOCK == (r - window + 1) // BLOCK][::3]
    s, seen = _window_scores(window, far)
    loaded = torch.ones(1, SEQ, SEQ, dtype=torch.bool)
    bad = torch.zeros(1, SEQ, dtype=torch.bool)
    bad[0, far] = True
    words = max_over_unseen_keys(s, seen, bad, BLOCK, loaded)
    assert f"all {len(far)} wrong rows" in words and "with a key older than its window" in words
    # a wrong row with no loaded key above its visible ones: another cause, nothing said
    other = bad.clone()
    other[0, 1] = True
    assert max_over_unseen_keys(s, seen, other, BLOCK, loaded) == ""
    # a row with such a key that came out right: the maximum did not take it in
    fewer = bad.clone()
    fewer[0, far[0]] = False
    assert max_over_unseen_keys(s, seen, fewer, BLOCK, loaded) == ""
    # those keys in blocks the kernel never visited: nothing it loaded explains the rows
    assert max_over_unseen_keys(s, seen, bad, BLOCK, torch.zeros_like(loaded)) == ""


def test_the_unneeded_visits_are_said_by_where_they_lie_only_where_all_lie_there():
    assert "wholly past its sequence's last key" in Extra(past_keys=3).words()
    assert "past the last diagonal key" in Extra(past_diagonal=2).words()
    assert Extra(past_keys=1, past_diagonal=1).words() == ""
    assert Extra(past_rows=2).words() == ""
    assert Extra().words() == ""
