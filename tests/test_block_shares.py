"""How a read-out's weight on each block of keys compares with softmax's share
(tutor.harness.problems.attention.block_shares), on weights built by hand: a row sum that
misses a rescale, an accumulator that misses it, blocks each against their own maximum,
and blocks off by factors no pattern explains.  The same words on real kernels are
checked in the drill 06 and 08 mistakes tests."""

from __future__ import annotations

import torch

from tutor.harness.problems.attention.block_shares import (
    block_shares_words,
    counted_keys_words,
    even_spans,
    zero_scores_words,
)

ROWS, KEYS, BLOCK = 6, 96, 16


def _scores() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    s = torch.randn((1, ROWS, KEYS), generator=g, dtype=torch.float64)
    s[..., 3 * BLOCK:] += 1.5  # the maximum grows part-way: a rescale changes something
    allowed = torch.ones((1, ROWS, KEYS), dtype=torch.bool)
    allowed[0, 0, 80:] = False  # one row sees fewer keys: masked keys weigh nothing
    p = torch.softmax(torch.where(allowed, s, float("-inf")), dim=-1)
    return s, allowed, p


def _per_block(x: torch.Tensor, fn) -> torch.Tensor:
    """(1, rows, blocks) of ``fn`` over each block's keys, repeated back to every key."""
    blocks = torch.stack([fn(x[..., sl]) for sl in even_spans(KEYS, BLOCK)], -1)
    return blocks.repeat_interleave(BLOCK, dim=-1)


def _block_max(s: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    return _per_block(torch.where(allowed, s, float("-inf")), lambda b: b.amax(-1))


def test_softmax_itself_is_said_to_be_nothing():
    s, allowed, p = _scores()
    assert block_shares_words(p, s, allowed, BLOCK) == ""


def test_a_total_off_with_every_block_in_proportion_blames_the_divisor():
    s, allowed, p = _scores()
    w = p * torch.linspace(0.7, 0.95, ROWS, dtype=torch.float64)[None, :, None]
    said = block_shares_words(w, s, allowed, BLOCK)
    assert "each row's weights keep softmax's proportions" in said and "×0.7 to ×0.95" in said
    assert "Below 1:" in said and "Above 1:" not in said and "running maximum" not in said
    above = block_shares_words(p * 1.3, s, allowed, BLOCK)
    assert "Above 1: the output is divided by less than the sum of the weights it accumulated" in above
    assert "Below 1:" not in above


def _with_zero_scores_past_the_keys(lengths: list[int], tile: int) -> tuple[torch.Tensor, ...]:
    """Rows that see keys 0..length-1, their last tile of ``tile`` keys read whole with the scores past
    the length filled with 0 (not -inf): each row's sum holds one exp(0 - max) per such position."""
    g = torch.Generator().manual_seed(1)
    s = torch.randn((1, len(lengths), KEYS), generator=g, dtype=torch.float64)
    allowed = torch.arange(KEYS)[None, None, :] < torch.tensor(lengths)[None, :, None]
    extra = torch.tensor([-n % tile for n in lengths], dtype=torch.float64)
    e = torch.where(allowed, s.exp(), 0.0)
    return s, allowed, e / (e.sum(-1) + extra)[..., None]


def test_scores_of_0_past_each_rows_keys_are_measured_in_its_last_block():
    """Blind round 26 (07 b19, 05 b22): masked scores filled with 0, not -inf.  The total is S / (S + E), E the
    positions past the row's last key in its last block; the read-out's blocks (pages) may be smaller than the
    kernel's tile, which ``tile`` names.  Totals off by a plain factor are not said to be that."""
    lengths = [96, 90, 70, 41, 17, 5]
    s, allowed, w = _with_zero_scores_past_the_keys(lengths, BLOCK)
    said = block_shares_words(w, s, allowed, BLOCK)
    assert "for every position after its last key in the block of 16 that holds it" in said, said
    assert "Below 1:" not in said
    s, allowed, w = _with_zero_scores_past_the_keys(lengths, 2 * BLOCK)
    said = block_shares_words(w, s, allowed, BLOCK, unit="page", tile=2 * BLOCK)
    assert "in the tile of 32 that holds it" in said, said
    assert "exp(0 - its maximum)" not in block_shares_words(w, s, allowed, BLOCK, unit="page")  # pages of 16 miss
    s, allowed, p = _scores()
    plain = block_shares_words(p * 0.8, s, allowed, BLOCK)
    assert "Below 1:" in plain and "exp(0 - its maximum)" not in plain


def test_a_row_sum_never_rescaled_is_measured_as_such():
    """The online softmax run block by block with acc rescaled by alpha and l not (l_i = l_i +
    sum(p)): each row's total is 1 / sum_b share_b exp(m_final - m_b), said as that (blind round 23)."""
    s, allowed, p = _scores()
    masked = torch.where(allowed, s, float("-inf"))
    m = torch.full((1, ROWS), float("-inf"), dtype=torch.float64)
    acc = torch.zeros((1, ROWS, KEYS), dtype=torch.float64)  # the weights, as an accumulator with one-hot V
    row_sum = torch.zeros((1, ROWS), dtype=torch.float64)
    for sl in even_spans(KEYS, BLOCK):
        m_new = torch.maximum(m, masked[..., sl].amax(-1))
        alpha = torch.exp(m - m_new).nan_to_num(0.0)
        block = torch.exp(masked[..., sl] - m_new[..., None])
        acc = acc * alpha[..., None]
        acc[..., sl] += block
        row_sum = row_sum + block.sum(-1)  # the mistake: l is never multiplied by alpha
        m = m_new
    said = block_shares_words(acc / row_sum[..., None], s, allowed, BLOCK)
    assert "each row's weights keep softmax's proportions" in said, said
    assert "a running sum l_i that is never rescaled gives" in said and "Below 1:" not in said, said
    assert "never rescaled" not in block_shares_words(p * 0.8, s, allowed, BLOCK)  # a plain factor is not it


def test_a_total_that_is_each_rows_own_sum_is_said_as_the_final_division_left_out():
    """Weights of exp(s - max) not divided by their sum: each row's factor is its own l."""
    s, allowed, p = _scores()
    masked = torch.where(allowed, s, float("-inf"))
    unnormalised = torch.where(allowed, (masked - masked.amax(-1, keepdim=True)).exp(), 0.0)
    said = block_shares_words(unnormalised, s, allowed, BLOCK)
    assert "not divided by l_i at the end" in said and "Above 1:" not in said, said
    assert "not divided by l_i" not in block_shares_words(p * 1.3, s, allowed, BLOCK)  # one factor for all rows


def test_rows_that_never_read_a_key_they_must_see_are_not_compared():
    """A row whose loop skipped keys renormalises over the rest: its blocks all weigh more than
    softmax's share, with nothing wrong in how it divides.  Such rows (a key with exactly 0
    weight that softmax weighs) say nothing here."""
    s, allowed, p = _scores()
    w = p.clone()
    w[..., 40:48] = 0.0  # keys 40..47 never read
    w = w / w.sum(-1, keepdim=True)
    assert block_shares_words(w, s, allowed, BLOCK) == ""


def test_blocks_kept_at_the_maximum_they_were_read_with_name_the_accumulator():
    s, allowed, p = _scores()
    block_max = _block_max(s, allowed)
    running = torch.cummax(torch.stack([block_max[..., j] for j in range(0, KEYS, BLOCK)], -1), -1).values
    running = running.repeat_interleave(BLOCK, dim=-1)
    final = block_max.amax(-1, keepdim=True)
    w = p * torch.exp(final - running)  # exp(s - max when read) / the true sum
    said = block_shares_words(w, s, allowed, BLOCK, unit="page", of="positions")
    assert "pages of 16 positions that were read while the running maximum was still lower weigh more" in said


def test_blocks_against_their_own_maximum_are_said_so():
    s, allowed, p = _scores()
    block_max = _block_max(s, allowed)
    w = p * torch.exp(block_max.amax(-1, keepdim=True) - block_max)
    assert "exponentiated against its own maximum" in block_shares_words(w, s, allowed, BLOCK)


def test_factors_no_pattern_explains_are_shown_for_the_worst_row_only_as_measured():
    s, allowed, p = _scores()
    factors = torch.ones((1, ROWS, KEYS), dtype=torch.float64)
    factors[0, 4, 2 * BLOCK:3 * BLOCK] = 2.5  # row 4's block 2 weighs 2.5 times its share
    said = block_shares_words(p * factors, s, allowed, BLOCK, row_name=lambda r: f"query {r}")
    assert "do not keep softmax's proportions to one another in 1 of the 6 rows" in said
    assert "in query 4 they weigh" in said and "block 2 ×2.50" in said and "block 0 ×" in said
    assert "running maximum was still lower" not in said


def test_rows_weighing_keys_they_may_not_see_are_not_compared():
    s, allowed, p = _scores()
    w = p.clone()
    w[0, 0, 90] = 0.3  # row 0 weighs a masked key: its blocks say nothing of the rescale
    w[0, 0] *= 0.5
    assert block_shares_words(w, s, allowed, BLOCK) == ""


def test_a_packed_axis_takes_each_sequence_blocks_from_its_own_start():
    """Two sequences on one key axis (drill 08): sequence 1 starts at key 40, mid-block; its
    blocks are cut from there, so a missing rescale fits the pattern there too."""
    g = torch.Generator().manual_seed(1)
    s = torch.randn((1, 2, 100), generator=g, dtype=torch.float64)
    s[0, 1, 72:] += 2.0
    allowed = torch.zeros((1, 2, 100), dtype=torch.bool)
    allowed[0, 0, :40], allowed[0, 1, 40:] = True, True
    spans = [slice(0, 16), slice(16, 32), slice(32, 40), slice(40, 56), slice(56, 72), slice(72, 88), slice(88, 100)]
    p = torch.softmax(torch.where(allowed, s, float("-inf")), dim=-1)
    masked = torch.where(allowed, s, float("-inf"))
    w = p.clone()
    for row, own in ((0, spans[:3]), (1, spans[3:])):  # every row misses the rescale, each in its own blocks
        running = torch.cummax(torch.stack([masked[0, row, sl].amax() for sl in own]), 0).values
        for j, sl in enumerate(own):
            w[0, row, sl] *= torch.exp(running[-1] - running[j])
    said = block_shares_words(w, s, allowed, 16, spans=spans)
    assert "running maximum was still lower" in said, said
    assert "running maximum was still lower" not in block_shares_words(w, s, allowed, 16)  # blocks from key 0


def test_slices_that_each_keep_their_own_maximum_are_measured_slice_by_slice():
    """Split-KV (drill 05): each slice's program keeps its own running maximum and a merge
    brings the slices to one; an accumulator not rescaled inside a slice is read against
    the slices the launch recorded, not against one loop over every block."""
    s, allowed, p = _scores()
    top = torch.stack([torch.where(allowed, s, float("-inf"))[..., sl].amax(-1) for sl in even_spans(KEYS, BLOCK)], -1)
    slices = torch.tensor([1, 1, 1, 2, 2, 2]).expand(1, ROWS, -1)
    w = p.clone()
    for first in (0, 3):
        running = torch.cummax(top[..., first:first + 3], -1).values
        for j in range(3):
            sl = even_spans(KEYS, BLOCK)[first + j]
            w[..., sl] *= torch.exp(running[..., -1:] - running[..., j:j + 1])
    said = block_shares_words(w, s, allowed, BLOCK, segments=slices)
    assert said.startswith(" Within each slice, the blocks of 16 keys that were read while the running maximum"), said
    assert "Within each slice" not in block_shares_words(w, s, allowed, BLOCK)  # one loop: no pattern fits


def _counted(counts: torch.Tensor, s: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """The weights of a kernel that adds each key ``counts`` times to its sums (both the accumulator and l)."""
    e = torch.where(allowed, (s - s.amax(-1, keepdim=True)).exp(), 0.0) * counts
    return e / e.sum(-1, keepdim=True)


def test_keys_added_twice_are_counted_from_their_weights():
    """Loop steps that overlap (blind round 20, 06/w26: steps of BLOCK_M=32 over blocks of 64) add
    the overlapping keys twice: each weighs twice its share against the keys added once."""
    s, allowed, _ = _scores()
    s = s * 0.2  # every key holds over 0.5 % of its row: each is compared
    p = torch.softmax(torch.where(allowed, s, float("-inf")), dim=-1)
    counts = torch.ones(KEYS, dtype=torch.float64)
    counts[32:64] = 2
    said = counted_keys_words(_counted(counts, s, allowed), s, allowed)
    assert "keys 32..63 count 2 times, the rest once" in said, said
    assert "read and added more than once" in said
    assert counted_keys_words(p, s, allowed) == ""  # softmax itself: every key once
    # an accumulator not rescaled: each block off by exp(final max - running max), no whole counts
    s0, _, p0 = _scores()
    masked = torch.where(allowed, s0, float("-inf"))
    running = torch.cummax(torch.stack([masked[..., sl].amax(-1) for sl in even_spans(KEYS, BLOCK)], -1), -1).values
    stale = p0 * torch.exp(masked.amax(-1, keepdim=True) - running.repeat_interleave(BLOCK, dim=-1))
    factor = stale[0, 1] / p0[0, 1]
    assert float(factor.max() / factor.min()) > 1.2  # the blocks' shares do differ
    assert counted_keys_words(stale / stale.sum(-1, keepdim=True), s0, allowed) == ""
    # a key missing (weight 0 where softmax gives it some) leaves its row unread: not said from it alone
    missing = _counted(counts, s, allowed)
    missing[..., 5] = 0
    assert counted_keys_words(missing, s, allowed) == ""


def test_keys_and_rows_that_weigh_a_score_of_zero():
    """K rows read as zeros (a load mask false for them, blind round 20 06/w27) score 0 in the
    rows that read them; a row whose q reads as zeros (06/w44) scores every key 0."""
    s, allowed, p = _scores()
    assert zero_scores_words(p, s, allowed) == ""  # softmax itself
    k_zero = torch.where(torch.arange(KEYS) >= 70, 0.0, s)
    k_zero[0, :3] = s[0, :3]  # rows 0..2 read those keys right
    w = torch.softmax(torch.where(allowed, k_zero, float("-inf")), dim=-1)
    said = zero_scores_words(w, s, allowed)
    assert "weigh a score of 0 and the rest their own (3 rows have such keys)" in said, said
    assert "keys 70..79" in said or "keys 70..95" in said, said
    q_zero = s.clone()
    q_zero[0, 4:] = 0.0
    w = torch.softmax(torch.where(allowed, q_zero, float("-inf")), dim=-1)
    said = zero_scores_words(w, s, allowed)
    assert "2 rows weigh every key they see alike" in said and "first row 4" in said, said
    # weights of another temperature fit neither a key's own score nor 0
    assert zero_scores_words(torch.softmax(torch.where(allowed, 0.5 * s, float("-inf")), -1), s, allowed) == ""


def test_k_read_with_its_strides_swapped_is_named_only_where_its_scores_fit():
    """K addressed as if stored (head_dim, seq) (blind round 20, 06/w39): the weights are softmax
    over scores against that reading of K's memory; softmax of the true scores is not."""
    from tutor.harness.problems.attention.readout import k_layout_words, scores

    g = torch.Generator().manual_seed(1)
    q = torch.randn((1, 2, 40, 16), generator=g, dtype=torch.float64)
    k = torch.randn((1, 1, 40, 16), generator=g, dtype=torch.float64)
    allowed = torch.ones(40, 40, dtype=torch.bool).tril()
    swapped = k.reshape(1, 1, 16, 40).transpose(-1, -2).repeat_interleave(2, dim=1)
    w = torch.softmax(scores(q, swapped).masked_fill(~allowed, float("-inf")), -1)
    said = k_layout_words(w, q, k, allowed, group=2)
    assert "element c*40 + n of its head's K" in said and "at n*16 + c" in said, said
    right = torch.softmax(scores(q, k.repeat_interleave(2, dim=1)).masked_fill(~allowed, float("-inf")), -1)
    assert k_layout_words(right, q, k, allowed, group=2) == ""
