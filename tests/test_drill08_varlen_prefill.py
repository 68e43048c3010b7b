"""Drill 08 (packed variable-length sequences, chunked prefill), through the real
harness with Triton's interpreter: the shipped drill fails with its documented
codes, the solution passes with no finding, every student-like kernel in
solutions/08_varlen_prefill.mistakes.toml gets exactly its verdict, and the
measurements the diagnosis rests on (reference, needed blocks, the read-out's
per-sequence diagonal, the padded SDPA baseline's mask) agree with independent
computations.

Every file the tests write goes under tmp_path.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers_harness import check_files, check_jobs, check_one, job, shipped_drill, shipped_solution

from tutor.authoring import student_kernels as mistakes
from tutor.catalog import get_drill
from tutor.harness.problems import PROBLEMS, problem_for
from tutor.harness.problems import varlen_attention as va
from tutor.harness.problems.attention import readout
from tutor.harness.result import CheckResult

DRILL = get_drill("08")
ENTRIES = {m.stem: m for m in mistakes.load(DRILL)}


def said(result: CheckResult) -> list[str]:
    return [d.code for d in result.diagnosis if d.severity in ("error", "finding")]


# -- independent computations (no harness code) ---------------------------------------------

def loop_reference(case: va.Case, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Row by row, in float64: row i of sequence b attends to its keys 0 .. i + Nk - Nq."""
    out = torch.empty(q.shape, dtype=torch.float64)
    for b, (nq, nk) in enumerate(case.seqs):
        for h in range(case.heads):
            for i in range(nq):
                row = q[case.cu_q[b] + i, h].double()
                keys = k[case.cu_k[b]:case.cu_k[b] + i + nk - nq + 1, h].double()
                vals = v[case.cu_k[b]:case.cu_k[b] + i + nk - nq + 1, h].double()
                p = torch.softmax(keys @ row / case.head_dim**0.5, dim=0)
                out[case.cu_q[b] + i, h] = p @ vals
    return out


def test_registered_problem():
    assert DRILL.problem == "varlen_attention" and "varlen_attention" in PROBLEMS
    assert problem_for("varlen_attention").check_correctness is va.check_correctness


@pytest.mark.parametrize("case", va.cases_for(True, 32, 32), ids=lambda c: c.name)
def test_reference_is_per_sequence_attention(case):
    q, k, v = va.random_inputs(case, "cpu", torch.Generator().manual_seed(3))
    assert torch.allclose(va.reference(case, q, k, v), loop_reference(case, q, k, v), atol=1e-12)


# a tiny "mixed 8 full + 8 chunks" of bench/varlen_speed.py: whole sequences (Nq = Nk) of
# several lengths beside chunks whose keys run far past their queries
MIXED = va.Case("mixed", 2, 16, ((9, 9), (4, 4), (1, 1), (3, 3), (5, 40), (5, 33), (5, 12), (1, 7)))


def test_reference_of_a_mixed_pack_is_finite_and_per_sequence():
    """The bench's mixed rows printed nan: their float64 reference was skipped above 40k
    keys.  Now computed on every mix, by chunks of rows, and equal to per-sequence float64
    attention whatever the chunk."""
    q, k, v = va.random_inputs(MIXED, "cpu", torch.Generator().manual_seed(8))
    expected = loop_reference(MIXED, q, k, v)
    whole = va.reference(MIXED, q, k, v)
    assert bool(torch.isfinite(whole).all())
    assert torch.allclose(whole, expected, atol=1e-12)
    for tile in (1, 2 * 40, 2 * 40 * 3):  # one row at a time, one row of the longest, three rows
        assert torch.allclose(va.reference(MIXED, q, k, v, tile=tile), expected, atol=1e-12)


def test_reference_refuses_more_queries_than_keys():
    case = va.Case("bad", 1, 16, ((3, 3), (4, 2)))
    q, k, v = va.random_inputs(case, "cpu", torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="sequence 1 has Nq = 4 queries and Nk = 2 keys"):
        va.reference(case, q, k, v)


def test_cases_cover_every_boundary():
    """Nq = Nk, Nq = 1, a one-token sequence, ragged lengths and a block-multiple one, a chunk
    whose offset is not a multiple of the block, many short sequences, hostile scores."""
    cases = va.cases_for(True, 16, 64)
    seqs = [s for c in cases for s in c.seqs]
    assert (64, 128) in seqs  # one query block and two key blocks of the larger block size
    assert (1, 1) in seqs and any(nq == 1 < nk for nq, nk in seqs) and any(1 < nq == nk for nq, nk in seqs)
    assert any(nq < nk and (nk - nq) % 16 for nq, nk in seqs)
    assert any(len(c.seqs) >= 10 for c in cases) and any(c.q_scale > 1 for c in cases)
    first = cases[0].seqs[0][0]
    assert first < max(nq for nq, _ in cases[0].seqs)  # a grid sized by the first sequence misses rows


@pytest.mark.parametrize("nq,nk,bm,bn", [(37, 37, 32, 32), (21, 75, 32, 32), (1, 29, 16, 64), (32, 64, 64, 16)])
def test_needed_blocks_counted_pair_by_pair(nq, nk, bm, bn):
    counted = []
    for first in range(0, nq, bm):
        blocks = {c // bn for r in range(first, min(first + bm, nq)) for c in range(nk) if c <= r + nk - nq}
        assert blocks == set(range(len(blocks)))  # always a prefix of the key blocks
        counted.append(len(blocks))
    assert va.needed_blocks(nq, nk, bm, bn) == counted


def _weights(case: va.Case, last_key) -> torch.Tensor:
    """Synthetic read-out weights: row i of sequence b weighs keys 0 .. last_key(b, i) of
    its own sequence (uniformly); NaN where it weighs none."""
    w = torch.zeros((case.heads, case.cu_q[-1], case.cu_k[-1]), dtype=torch.float64)
    for b, (nq, _) in enumerate(case.seqs):
        for i in range(nq):
            last = last_key(b, i)
            if last < 0:
                w[:, case.cu_q[b] + i] = float("nan")
            else:
                w[:, case.cu_q[b] + i, case.cu_k[b]:case.cu_k[b] + last + 1] = 1.0 / (last + 1)
    return w


CASE = va.cases_for(True, 32, 32)[0]


def _diag(b: int, i: int) -> int:
    nq, nk = CASE.seqs[b]
    return i + nk - nq


def test_readout_right_diagonal_says_nothing():
    read = va.read_rows(_weights(CASE, _diag), CASE, 16)
    assert not va.diagonal_findings(read, CASE, 16) and not va.other_sequence_findings(read, CASE)


def test_readout_names_the_unoffset_diagonal_with_its_measured_shift():
    found = va.diagonal_findings(va.read_rows(_weights(CASE, lambda b, i: i), CASE, 16), CASE, 16)
    assert list(found) == ["diagonal-not-offset"]
    assert "86 keys short" in found["diagonal-not-offset"]  # sequence (21, 107)


def test_readout_names_a_uniform_shift_and_a_packed_index_mask():
    strict = va.diagonal_findings(va.read_rows(_weights(CASE, lambda b, i: _diag(b, i) - 1), CASE, 16), CASE, 16)
    assert list(strict) == ["diagonal-shifted"] and "1 key short" in strict["diagonal-shifted"]

    def packed(b: int, i: int) -> int:
        return min(_diag(b, i) + CASE.cu_q[b] - CASE.cu_k[b], CASE.seqs[b][1] - 1)

    found = va.diagonal_findings(va.read_rows(_weights(CASE, packed), CASE, 16), CASE, 16)
    assert list(found) == ["diagonal-from-packed-index"]


def test_readout_names_the_neighbour_read():
    w = _weights(CASE, _diag)
    b = 3  # (21, 107): its rows also weigh the previous sequence's only key
    w[:, CASE.cu_q[b]:CASE.cu_q[b + 1], CASE.cu_k[b] - 1] = 0.01
    found = va.other_sequence_findings(va.read_rows(w, CASE, 16), CASE)
    assert list(found) == ["reads-other-sequence"]
    assert f"rows of sequence 3 weigh key 0 of sequence 2 (packed {CASE.cu_k[b] - 1})" in found["reads-other-sequence"]


def test_rows_that_keep_only_their_diagonal_block_are_said_as_such():
    """Each row weighs only the keys of the 16-key block holding its diagonal (an accumulator
    zeroed each block: blind round 11); a row one key short of its diagonal is not that."""
    w = _weights(CASE, _diag)
    for b, (nq, _) in enumerate(CASE.seqs):
        for i in range(nq):
            first = _diag(b, i) // 16 * 16
            w[:, CASE.cu_q[b] + i, CASE.cu_k[b]:CASE.cu_k[b] + first] = 0.0
    found = va.diagonal_findings(va.read_rows(w, CASE, 16), CASE, 16)
    assert list(found) == ["keys-missed"]
    assert "weigh only keys of the K/V block holding their diagonal (blocks of BLOCK_N = 16" in found["keys-missed"]
    w = _weights(CASE, _diag)
    w[:, CASE.cu_q[1] + 20, CASE.cu_k[1] + 3] = 0.0  # one key missed in the middle of a row
    found = va.diagonal_findings(va.read_rows(w, CASE, 16), CASE, 16)
    assert list(found) == ["keys-missed"] and "K/V block holding" not in found["keys-missed"]


def test_weights_below_fp16_at_the_measured_slope_are_not_missed_keys():
    """At a slope of 32 (sqrt(d) for 1/sqrt(d), d = 32), keys scored far below a row's best come
    back 0 from an fp16 output: the temperature's doing, not the mask's (blind round 11)."""
    s = torch.tensor([[[0.0, -0.2, -0.6, -0.1]]], dtype=torch.float64)
    allowed = torch.tensor([[[True, True, True, False]]])
    small = readout.too_small_to_read(s, allowed, 32.0)
    assert small.tolist() == [[[False, False, True, False]]]  # e^(-19) of the best: below 2^-22
    assert not readout.too_small_to_read(s, allowed, 1.0).any()
    assert not readout.too_small_to_read(s, allowed, None).any()


def test_padded_sdpa_baseline_masks_like_the_reference():
    case = va.cases_for(True, 32, 32)[0]
    q, k, v = va.random_inputs(case, "cpu", torch.Generator().manual_seed(5))
    qp, kp, vp, mask = va.padded(case, q.float(), k.float(), v.float())
    out = torch.nn.functional.scaled_dot_product_attention(qp, kp, vp, attn_mask=mask)
    expected = va.reference(case, q, k, v)
    for b, (nq, _) in enumerate(case.seqs):
        got = out[b, :, :nq].transpose(0, 1).double()
        assert torch.allclose(got, expected[case.cu_q[b]:case.cu_q[b + 1]], atol=1e-4)


def brute_needed(nq: int, nk: int, bm: int, bn: int) -> list[list[bool]]:
    """(query block, key block) needed when some row of it sees some key of it, pair by pair."""
    return [[any(c <= r + nk - nq for r in range(i, min(i + bm, nq)) for c in range(j, min(j + bn, nk)))
             for j in range(0, nk, bn)] for i in range(0, nq, bm)]


def test_headline_map_is_the_largest_sequence_as_recorded():
    """The headline map: the sequence with the most blocks, its cells counted from the
    visit buffer (every head), the needed cells those of its offset diagonal; a block
    recorded past its keys widens the map as an unneeded cell."""
    case = va.Case("c", 2, 16, ((5, 40), (33, 33), (20, 100), (1, 1)))
    assert va.headline_sequence(case, 16, 16) == 2  # 16-blocks: (20, 100) has 2x7 pairs, (33, 33) 3x3
    # 32-blocks: (33, 33) and (20, 100) both 2x2 = 1x4 pairs; (33, 33) has one to skip, (20, 100) none
    assert va.headline_sequence(case, 32, 32) == 1
    visits = torch.zeros(va.visit_shape(case, 32, 32), dtype=torch.int32)
    b = 1
    for h in range(case.heads):  # needed: (0, 0), (1, 0), (1, 1); head 1 also visits (0, 1), and key block 2
        visits[b * case.heads + h, 0, 0] = visits[b * case.heads + h, 1, :2] = 1
    visits[b * case.heads + 1, 0, 1] = visits[b * case.heads + 1, 1, 2] = 1
    visits[0, 0, :] = 1  # another sequence's visits stay out of this map
    m = va.headline_map(case, visits, 32, 32)
    assert (m.seq, m.heads, m.block_m, m.block_n) == (33, 2, 32, 32)
    assert m.counts == [[2, 1, 0], [2, 2, 1]]
    assert m.ideal == [row + [False] for row in brute_needed(33, 33, 32, 32)]
    assert (m.visited_blocks, m.ideal_blocks, m.total_blocks) == (8, 6, 12)
    assert m.label.startswith("sequence 1 (Nq = 33, Nk = 33, Nk - Nq = 0), the c case's largest")


# -- the real harness on real kernels --------------------------------------------------------

def test_shipped_fails_as_documented_and_solution_is_solved():
    results = check_files([shipped_drill("08"), shipped_solution("08")])
    shipped, solution = results[shipped_drill("08")], results[shipped_solution("08")]
    assert shipped.error is None and not shipped.passed
    assert said(shipped) == list(DRILL.shipped.codes), [d.message for d in shipped.diagnosis]
    assert solution.error is None and solution.passed and solution.solved and not solution.diagnosis


def test_mistakes_file_covers_the_issue():
    assert len(ENTRIES) >= 25
    correct = [m for m in ENTRIES.values() if m.passes and not m.codes]
    assert len(correct) >= 5
    for stem, m in ENTRIES.items():
        assert all(code in DRILL.diagnoses for code in m.codes), stem
        assert m.passes or m.codes, stem


@pytest.mark.slow
def test_every_mistake_gets_its_verdict(tmp_path: Path):
    written = {stem: path for stem, path in mistakes.materialise(tmp_path).items() if stem in ENTRIES}
    results = check_files(list(written.values()))
    wrong = {}
    for stem, path in written.items():
        result, entry = results[path], ENTRIES[stem]
        got = (result.error is None, result.passed, said(result))
        if got != (True, entry.passes, list(entry.codes)):
            wrong[stem] = (got, [d.message for d in result.diagnosis], result.error)
        for d in result.diagnosis:
            assert "{" not in d.message, stem
    assert not wrong, wrong
    # V read through K: no claim of which keys a row weighs, from a read-out that describes nothing
    v_from_k = next(d.message for d in results[written["08_v_loaded_from_k"]].diagnosis)
    assert "your output is no weighted sum of its own head's rows of V" in v_from_k and "show no key" not in v_from_k
    # a missing rescale, told apart by how the K/V blocks share the weight (block_shares)
    l_words = " ".join(d.message for d in results[written["08_l_not_rescaled"]].diagnosis)
    assert "each row's weights keep softmax's proportions" in l_words and "running maximum" not in l_words
    # blind round 23 (08/l_no_rescale): each row's total is what an l never rescaled gives, measured
    assert "a running sum l_i that is never rescaled gives" in l_words, l_words
    acc_words = " ".join(d.message for d in results[written["08_acc_not_rescaled"]].diagnosis)
    assert "read while the running maximum was still lower weigh more" in acc_words, acc_words
    # blind round 11: the temperature said at its slope, not as missed keys; the blocks a row keeps; the heads unwritten
    hot = " ".join(d.message for d in results[written["08_scale_times_sqrt_d"]].diagnosis)
    assert "slope 32.000" in hot and "misses key" not in hot, hot
    zeroed = " ".join(d.message for d in results[written["08_acc_zeroed_each_block"]].diagnosis)
    assert "weigh only keys of the K/V block holding their diagonal" in zeroed, zeroed
    # the diagonal each sequence's rows measure, rows cut at the sequence's last key set aside: the rule it follows
    for stem, rule in (("diag_sign_flipped", "d = Nq - Nk, the offset with its sign flipped"),
                       ("diag_from_the_longest_sequences", "(max_seqlen_k - max_seqlen_q = "),
                       ("diag_from_the_packed_starts", "d = cu_seqlens_k[b] - cu_seqlens_q[b]")):
        words = " ".join(d.message for d in results[written[f"08_{stem}"]].diagnosis)
        assert rule in words, words
    heads = " ".join(d.message for d in results[written["08_store_without_head_offset"]].diagnosis)
    assert "only head 1 still holds the poison; head 0 of the same rows was written" in heads, heads
    assert "each equals the right output of another (row, head)" in heads and "holds row 0 head 1's output" in heads
    # blind round 13: rows NaN whatever V holds are said as such, with where such a NaN usually starts
    inverted = " ".join(d.message for d in results[written["08_rescale_the_other_way_round"]].diagnosis)
    assert "each of those rows weighs every key NaN" in inverted and "alpha must be exp2(m_i - m_new)" in inverted
    assert "show no key" not in inverted, inverted  # blind round 23: nothing was measured as seen from NaN weights
    # blind round 23: a last weighed key that follows a wrong bound over every sequence names it; one key short
    # of the bound (fits the cut at Nq on one sequence only) names none
    for stem, law in (("key_mask_against_nq", "last weighed key is min(i + Nk - Nq, Nq - 1)"),
                      ("bound_not_offset", "without the Nk - Nq offset its bound needs")):
        words = " ".join(d.message for d in results[written[f"08_{stem}"]].diagnosis)
        assert law in words, words
    short = " ".join(d.message for d in results[written["08_bound_one_key_short"]].diagnosis)
    assert "Measured over every sequence's rows" not in short, short
    # K and V passed the other way round: the output is attention with them exchanged
    swapped = " ".join(d.message for d in results[written["08_k_and_v_passed_swapped"]].diagnosis)
    assert "attention with its own K and V exchanged" in swapped, swapped
    # blind round 14: a maximum of the block alone overflows only where the hostile case's first key towers
    alone = " ".join(d.message for d in results[written["08_running_max_of_the_block_alone"]].diagnosis)
    assert "Those rows are all in sequence 0 of that case, the one whose first key scores about 160" in alone, alone
    # a store into Q is measured (each input compared with its source after the launch)
    into_q = " ".join(d.message for d in results[written["08_stores_into_q"]].diagnosis)
    assert "Q changed in " in into_q and " of its 7936 elements during the launch" in into_q, into_q


def test_the_causal_only_timing_is_measured_and_shown():
    """Drill 08 times one launch, keyed "causal" (there is no full mode): the performance
    phase measures it and the report shows it (it raised KeyError 'full' before)."""
    from tutor.report import performance_lines

    result = check_one(shipped_solution("08"), timing=True)
    assert result.performance.status == "done", result.performance.reason
    assert result.full_ms is None and result.causal_ms is not None and result.causal_ms > 0
    assert any("causal" in line and "ms" in line for line in performance_lines(result))


def test_headline_visit_map_from_the_kernel(tmp_path: Path):
    """The check's headline map is the default case's largest sequence, counted from what
    the kernel recorded: the solution visits exactly the needed blocks; a kernel that visits
    every key block of its sequence shows the block past the diagonal; one that runs to the
    longest sequence's keys widens the map past this one's; the report names the sequence."""
    from tutor.report import verdict_lines

    written = mistakes.materialise(tmp_path)
    past_diagonal, past_keys = written["08_bound_all_keys"], written["08_bound_longest_sequence"]
    results = check_files([shipped_solution("08"), past_diagonal, past_keys])
    case = va.cases_for(True, 32, 32)[0]  # the solution's and these kernels' blocks
    b = max(range(len(case.seqs)), key=lambda s: len(brute_needed(*case.seqs[s], 32, 32))
            * len(brute_needed(*case.seqs[s], 32, 32)[0]))
    nq, nk = case.seqs[b]
    needed = brute_needed(nq, nk, 32, 32)
    assert any(not cell for row in needed for cell in row)  # the map has a block to skip

    solved = results[shipped_solution("08")]
    m = solved.visits
    assert m is not None and solved.solved
    assert (m.seq, m.heads, m.ideal) == (nk, case.heads, needed)
    assert m.counts == [[case.heads * cell for cell in row] for row in needed]
    assert solved.visited_blocks == solved.ideal_blocks < solved.total_blocks
    lines = verdict_lines(solved)
    assert any(line.startswith("visit map") and f"sequence {b} (Nq = {nq}, Nk = {nk}" in line for line in lines)

    over = results[past_diagonal].visits
    assert over is not None and results[past_diagonal].passed
    assert over.ideal == needed and over.counts == [[case.heads] * len(needed[0])] * len(needed)
    assert over.visited_blocks > over.ideal_blocks

    wide = results[past_keys].visits
    max_k_blocks = -(-max(k for _, k in case.seqs) // 32)
    assert wide is not None and len(wide.counts[0]) == max_k_blocks > len(needed[0])
    assert all(row[len(needed[0]):] == [False] * (max_k_blocks - len(needed[0])) for row in wide.ideal)
    assert all(count == case.heads for row in wide.counts for count in row)


def test_the_app_draws_the_headline_map_under_what_it_is_of():
    """The app's map draws the label (which sequence) above the key-block axis, wrapped no
    wider than the map or its legend, and the cells as for every drill."""
    from tutor.app.widgets.visit_map import Cell, classify, render_map

    case = va.Case("default", 2, 16, ((1, 9), (33, 33)))
    visits = torch.zeros(va.visit_shape(case, 32, 32), dtype=torch.int32)
    visits[2:, 0, :2] = visits[2:, 1, :2] = 1  # sequence 1, both heads: (0, 1) is past the diagonal
    m = va.headline_map(case, visits, 32, 32)
    assert classify(m) == [[Cell.VISITED, Cell.EXTRA], [Cell.VISITED, Cell.VISITED]]
    lines = render_map(m).plain.splitlines()
    axis = next(n for n, line in enumerate(lines) if "key block" in line)
    legend = next(line for line in lines if line.startswith("cells per head"))
    widest = max(len(legend), max(len(line) for line in lines[axis + 2:axis + 4]))
    assert " ".join(lines[:axis]) == m.label and all(len(line) <= widest for line in lines[:axis])
    assert lines[axis + 2:axis + 4] == ["0  ██ xx", "1  ██ ██"]


# -- the roofline of the timed launch -----------------------------------------------------------

def element_count(case: va.Case, visits: torch.Tensor, bm: int, bn: int, d: int) -> tuple[int, int]:
    """Every visited tile expanded to the (row, key) scores it covers inside its sequence:
    4·d FLOPs a score; a K and a V row a key column it covers; Q loaded and O stored once a row."""
    flops = kv = 0
    for b, (nq, nk) in enumerate(case.seqs):
        for h in range(case.heads):
            tiles = (visits[b * case.heads + h] != 0).to(torch.int64)
            flops += 4 * d * int(tiles.repeat_interleave(bm, 0).repeat_interleave(bn, 1)[:nq, :nk].sum())
            # a tile loads its real keys whatever its rows (a program past a short sequence's
            # end that does not return still loads them)
            kv += 2 * d * int(tiles.repeat_interleave(bn, 1)[:, :nk].sum())
    return flops, (kv + 2 * case.heads * case.cu_q[-1] * d) * 2


@pytest.mark.parametrize("bm,bn", [(32, 32), (16, 64), (64, 16)])
def test_counted_work_agrees_with_an_element_count(bm, bn):
    case = va.Case("c", 2, 16, ((5, 40), (33, 33), (20, 100), (1, 1)))
    visits = torch.randint(0, 2, va.visit_shape(case, bm, bn), generator=torch.Generator().manual_seed(bm + bn),
                           dtype=torch.int32)
    counted = va.count_work(case, visits, bm, bn)
    assert (counted.work.flops, counted.work.bytes) == element_count(case, visits, bm, bn, 16)
    assert counted.work.visited_tiles == int((visits != 0).sum())
    needed = torch.zeros_like(visits)
    for b, (nq, nk) in enumerate(case.seqs):
        for i, row in enumerate(brute_needed(nq, nk, bm, bn)):
            needed[b * case.heads:(b + 1) * case.heads, i, :len(row)] = torch.tensor(row, dtype=torch.int32)
    assert counted.ideal.flops == element_count(case, needed, bm, bn, 16)[0]
    assert counted.ideal.bytes == 2 * 16 * 2 * (2 * case.cu_q[-1] + 2 * case.cu_k[-1])


def test_the_timed_launch_gets_a_roofline_counted_from_its_visits(tmp_path: Path):
    """The performance phase counts the timed launch (the interpreter's: the default case)
    from a visit-recording launch: the solution's FLOPs are the needed blocks' exactly; a
    kernel visiting every block of its sequence counts more; the report shows them."""
    from tutor.report import performance_lines

    past_diagonal = mistakes.materialise(tmp_path)["08_bound_all_keys"]
    solved, over = check_jobs([job(shipped_solution("08"), timing=True), job(past_diagonal, timing=True)])
    case = va.cases_for(True, 32, 32)[0]
    needed = torch.zeros(va.visit_shape(case, 32, 32), dtype=torch.int32)
    for b, (nq, nk) in enumerate(case.seqs):
        for i, row in enumerate(brute_needed(nq, nk, 32, 32)):
            needed[b * case.heads:(b + 1) * case.heads, i, :len(row)] = torch.tensor(row, dtype=torch.int32)
    flops, nbytes = element_count(case, needed, 32, 32, case.head_dim)
    for result in (solved, over):
        assert result.performance.status == "done", result.performance.reason
        assert result.roofline is not None and [x.mode for x in result.roofline.launches] == ["causal"]
        assert result.roofline.launches[0].ideal_flops == flops
    launch = solved.roofline.launches[0]
    assert (launch.flops, launch.bytes, launch.visited_tiles) == (flops, nbytes, int(needed.sum()))
    assert launch.ms is None and launch.tflops is None  # the interpreter: counts, no rates
    assert over.roofline.launches[0].flops > flops and over.roofline.launches[0].bytes > nbytes
    assert any(line.startswith("roofline") and "sequences" in line for line in performance_lines(solved))
