"""Drill 07's weights read-out (tutor/harness/problems/paged_weights.py), the measurement its
diagnosis makes where no load is counted (a GPU), run here on Triton's interpreter with the
counting turned off: every student-like kernel's read codes come from it as they come from the
counted loads (kv-read-repeatedly aside: bytes are not measurable from outputs), a correct
kernel written differently gets no finding from it, and its launches reuse the variants the
correctness launches compiled.  Interpreter kernels in-process; files go under tmp_path."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_harness import entry_module

from tutor.authoring import student_kernels as mistakes
from tutor.catalog import get_drill
from tutor.harness.device import select_device
from tutor.harness.problems import paged_decode as paged
from tutor.harness.problems import paged_diagnose, paged_weights
from tutor.harness.result import code_name, codes_match

DRILL = get_drill("07")
ENTRIES = {e.name: e for e in mistakes.load(DRILL)}
READ_CODES = {"positions-unread", "reads-past-length", "reads-unlisted-page"}
# bytes moved, and loads into a margin whose values reach nothing (traced on the interpreter only):
# no output tells them
UNMEASURABLE = {"kv-read-repeatedly", "read-past-end-unused"}


@pytest.fixture(scope="module", autouse=True)
def device():
    return select_device("cpu")  # Triton's interpreter, as a worker on a machine without a GPU


def _module(tmp_path, name):
    return entry_module("07", name, tmp_path)


def _checked(module, count_reads):
    return paged.check_correctness(DRILL, module, True, "cpu", torch.Generator().manual_seed(0),
                                   count_reads=count_reads)


def test_every_pool_row_has_one_class_and_held_rows_their_position():
    case = paged.CPU_CASES[0]
    p = paged.make_inputs(case, "cpu", torch.Generator().manual_seed(2))
    rows = paged_weights.rows_of(case, p)
    for s, n in enumerate(case.lengths):
        for pos in range(paged.pages_needed(n, case.page_size) * case.page_size):
            page, slot = int(p.block_table[s, pos // case.page_size]), pos % case.page_size
            for j in range(case.kv_heads):
                want = paged_weights.held_class(case, s, j) if pos < n else paged_weights.past_class(case, s)
                assert rows.klass[page, j, slot] == want and rows.pos[page, j, slot] == pos
                assert rows.target[page, j, slot] == paged_weights.held_class(case, s, j)
    assert sorted(rows.unlisted) == sorted(page for page, (_, j) in enumerate(p.owner) if j < 0)
    for i, page in enumerate(rows.unlisted):
        assert (rows.klass[page] == paged_weights.unlisted_class(case, i)).all() and (rows.target[page] == -1).all()


def on_gpu(entry: mistakes.Mistake) -> tuple[str, ...]:
    """What a compiled (GPU) check must (or, for a code written "code?", may) say: the entry's
    gpu_codes where it has them."""
    return entry.codes if entry.gpu_codes is None else tuple(code_name(c) for c in entry.gpu_codes)


# wrong kernels whose read codes come from loads of rows that weigh 0 (V loaded past a length, its p
# masked): the counted loads see them, no output does; and one whose every query head reads K/V head 0:
# the outputs say heads-mixed (another K/V head's attention), the other heads' rows never loaded are the
# counted loads' alone (the H200 of run 31, call 2, said heads-mixed alone too)
WEIGHED_ZERO = {"v_load_unmasked", "last_page_unmasked_loads", "pool_row_without_the_kv_head"}


def read_out(entry: mistakes.Mistake) -> list[str]:
    """What the read-out must say at the CPU cases: the counted codes, less what no output
    tells (bytes read; for a correct kernel, loads that took no part in any softmax)."""
    gone = READ_CODES | UNMEASURABLE if entry.passes or entry.name in WEIGHED_ZERO else UNMEASURABLE
    return [c for c in entry.codes if code_name(c) not in gone]


# entries whose CPU code needs a CPU case's shape: a rescale after the add leaves a one-tile slice's
# state as the launcher's zeros (states-unchanged) only where slices are one tile long, which the
# GPU's cases never are (H100 run 25, call 2: its message there says the positions it wiped)
# (H100 run 27, call 1) the slice size rounded down to whole tiles empties every slice only where a slice is
# shorter than a tile (the CPU's cases: NaN); the state index without the slice leaves slots no slice wrote,
# whose torch.empty memory held NaN on the CPU and finite values on the GPU
# (pool_row_adds_the_position, run 30: the GPU's cases hand its rows other pages than the CPU's)
CASES_DECIDE = {"acc_rescaled_after_add", "split_size_rounded_down_to_zero", "state_index_without_the_slice",
                "pool_row_adds_the_position"}


def test_the_gpu_codes_leave_out_only_what_the_interpreter_alone_measures():
    """A GPU check says what the read-out says at the CPU cases, and at most more read codes
    (the GPU cases are larger: a wrong table hands a sequence more of another's pages)."""
    for entry in ENTRIES.values():
        if entry.name in CASES_DECIDE:
            continue
        gpu, cpu = list(on_gpu(entry)), read_out(entry)
        assert [c for c in gpu if c in cpu] == cpu, entry.name
        assert set(gpu) - set(cpu) <= READ_CODES, entry.name
    assert on_gpu(ENTRIES["last_page_unmasked_loads"]) == ("v-read-unmasked",)
    assert read_out(ENTRIES["table_row_stride"]) != list(on_gpu(ENTRIES["table_row_stride"]))  # measured on an H200


# the wrong kernels whose counted loads name a read code, and the correct ones written differently
WRONG = [e.name for e in ENTRIES.values() if not e.passes and {code_name(c) for c in e.codes} & READ_CODES]
RIGHT = [e.name for e in ENTRIES.values() if e.passes]


@pytest.mark.slow
@pytest.mark.parametrize("name", WRONG + ["heads_next_group", "scores_unmasked", "merge_row_shifted"])
def test_the_read_out_names_what_the_counted_loads_name(tmp_path, name):
    entry = ENTRIES[name]
    diagnosis = _checked(_module(tmp_path, name), count_reads=False).diagnose().diagnosis
    assert codes_match(diagnosis, read_out(entry)), [d.code for d in diagnosis]  # what a GPU check says here
    for d in diagnosis:
        if d.code in READ_CODES:  # the detail names the measurement it quotes: no load was counted
            detail = d.message.removeprefix(DRILL.diagnosis_text(d.code).message)
            assert detail.startswith(" Weights read-out (") and "ounted loads" not in detail, detail


@pytest.mark.slow
@pytest.mark.parametrize("name", RIGHT)
def test_a_correct_kernel_written_differently_gets_no_finding_from_the_read_out(tmp_path, name):
    module = _module(tmp_path, name)
    relaunch = paged.relauncher(module, "cpu")
    gen = torch.Generator().manual_seed(0)
    for case in paged.CPU_CASES[:3]:  # default, ragged, short: GQA 4, 1, 8; pages of 8, 16, 32
        x = paged.run(module, case, "cpu", gen)
        assert paged.evaluate(x, DRILL.tolerance).passed
        cw = paged_weights.read_case(x, relaunch)
        assert cw.finite.all() and cw.took is not None
        facts = paged_diagnose.weighed_facts(cw)
        assert facts.unread == [] and facts.past == [] and facts.unlisted == [], facts
        c = x.case
        for b, n in enumerate(c.lengths):  # every held position, and nothing past the length, took part
            assert cw.took[b, :, :n].all() and not cw.took[b, :, n:].any()
            own = b * c.kv_heads + np.arange(c.heads) // c.group  # each head's whole softmax on its own K/V head
            assert np.allclose(cw.share[b, np.arange(c.heads), own], 1.0, atol=2e-3)


def _recording(module, calls):
    launcher = module.attention

    def attention(q, k_pages, v_pages, block_table, lengths, out=None):
        calls.append(tuple((tuple(t.shape), tuple(t.stride()), t.dtype, t.data_ptr() % 16)
                           for t in (q, k_pages, v_pages, block_table, lengths, out)))
        return launcher(q, k_pages, v_pages, block_table, lengths, out=out)

    module.attention = attention
    return module


@pytest.mark.slow
def test_read_out_launches_reuse_a_variant_the_verdict_compiled(tmp_path):
    calls: list[tuple] = []
    module = _recording(_module(tmp_path, "offset_missing"), calls)
    correctness = _checked(module, count_reads=False)
    verdict = set(calls)
    assert len(calls) == len(paged.CPU_CASES)
    del calls[:]
    diagnosis = correctness.diagnose().diagnosis
    assert calls, "the diagnosis read nothing out"
    assert set(calls) <= verdict, set(calls) - verdict
    unread = next(d.message for d in diagnosis if d.code == "positions-unread")
    # every value but a page's first (offset 0) got no weight: 1..7, 9..15, ... of sequence 0
    assert "the values of sequence 0 positions 1..7, 9..15" in unread and "got no weight" in unread


@pytest.mark.slow
def test_more_classes_than_head_dim_take_several_class_launches_and_passes(tmp_path):
    # 3 sequences x 8 K/V heads = 24 held classes > head_dim 16: two class launches and two
    # position passes (no correctness case needs them; a shape override may)
    case = paged.Case("many", 8, 8, 8, 16, (13, 5, 16))
    gen = torch.Generator().manual_seed(5)
    right, wrong = _module(tmp_path, "seven_splits"), _module(tmp_path, "offset_missing")
    x = paged.run(right, case, "cpu", gen)
    cw = paged_weights.read_case(x, paged.relauncher(right, "cpu"))
    assert cw.launches == 2 + 2  # 24 held + 3 past + 5 unlisted classes: 2; positions 0..15: 1 a pass, 2 passes
    assert cw.finite.all() and cw.took is not None
    for b, n in enumerate(case.lengths):
        assert cw.took[b, :, :n].all() and not cw.took[b, :, n:].any()
    y = paged.run(wrong, case, "cpu", gen)
    unread = paged_weights.unread_words(paged_weights.read_case(y, paged.relauncher(wrong, "cpu")))
    # offset 0 of each page alone: sequence 0's 1..7, 9..12; sequence 1's 1..4; sequence 2's 1..7, 9..15
    assert unread == ["the values of sequence 0 positions 1..7, 9..12 of 13 got no weight, in any K/V head, in"
                      " the output of its query heads 0..7",
                      "the values of sequence 1 positions 1..4 of 5 got no weight, in any K/V head, in the output"
                      " of its query heads 0..7",
                      "the values of sequence 2 positions 1..7, 9..15 of 16 got no weight, in any K/V head, in the"
                      " output of its query heads 0..7"]
