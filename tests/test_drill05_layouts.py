"""Drill 05's read-outs on layouts other than the solution's: the layouts' arithmetic
(no kernel), the split kernel alone on the tutor's inputs (real interpreter kernels from
the mistakes file: slice-major states, m and l packed, slices not whole blocks, a split
grid one short) and the timed launch's check against float64."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # TRITON_INTERPRET set before triton's import, as a worker does
WHERE = "cpu" if DEVICE.interpreter else "cuda"

from tutor.authoring import student_kernels as mistakes  # noqa: E402
from tutor.catalog import get_drill, solution_path  # noqa: E402
from tutor.harness.problems import split_kv_decode as decode  # noqa: E402
from tutor.harness.problems import split_kv_layout as layout  # noqa: E402
from tutor.harness.problems import split_kv_readout as apart  # noqa: E402

DRILL = get_drill("05")
ENTRIES = {e.name: e for e in mistakes.load(DRILL)}
SMALL = decode.Case("small", 4, 2, 100, 16, 1.0)  # lengths 100, ~60, ~20, <=20: empty slices beside full ones


def _module(tmp_path: Path, name: str) -> ModuleType:
    path = tmp_path / f"{name}.py"
    if name == "solution":
        path.write_text(solution_path(DRILL).read_text(encoding="utf-8"), encoding="utf-8")
    else:
        path.write_text(ENTRIES[name].text(DRILL), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"drill05_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_layout_reads_back_what_it_wrote():
    rows, slots, d = 3, 4, 5
    sizes = {"r": rows, "s": slots, "f": 2, "d": d}
    canon = torch.arange(2 * rows * slots, dtype=torch.float64).reshape(2, rows, slots)
    for lay in apart.scalar_layouts(2):
        assert torch.equal(lay.canonical(lay.flatten(canon), sizes), canon), lay
    # slice-major: slot s of row r sits at s * rows + r
    flat = apart.Layout("srf").flatten(canon[:1])
    assert float(flat[1 * rows + 2]) == float(canon[0, 2, 1])
    vec = torch.randn(rows, slots, d, dtype=torch.float64)
    for lay in apart.VECTOR_LAYOUTS:
        assert torch.equal(lay.canonical(lay.flatten(vec), sizes), vec)
    assert apart.scalar_layouts(1)[0] == apart.ROW_MAJOR["scalar"]


def _probe(module: ModuleType) -> tuple[decode.Launch, apart.Roles, layout.Measured | layout.Unread]:
    x = decode.run(module, SMALL, WHERE, torch.Generator().manual_seed(2))
    b, h, _, d = SMALL.shape
    assert x.k_view is not None and x.v_view is not None
    roles = apart.find_roles(x.calls, x.k_view, x.out, b * h, d)
    assert roles is not None
    return x, roles, layout.probe(module, roles, x.k_view, x.v_view, x.lengths, h)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "vector", "scalar"), [("solution", "rsd", "rsf"), ("slice_major", "srd", "srf"),
                                                        ("packed_ml", "rsd", "rsf")])
def test_the_split_alone_tells_its_layout_and_its_slices(tmp_path, name, vector, scalar):
    module = _module(tmp_path, name)
    x, roles, measured = _probe(module)
    assert isinstance(measured, layout.Measured)
    assert measured.layouts[roles.vector].order == vector
    assert all(measured.layouts[pos].order == scalar for pos in roles.tensors)
    lengths = x.lengths.cpu().repeat_interleave(SMALL.heads)
    assert measured.counts is not None and measured.counts.sum(-1).long().tolist() == lengths.tolist()
    assert measured.owner is not None and not bool(measured.unwritten.any()) and measured.words == ""
    # the slices are whole blocks of BLOCK_N here: the visits agree with the measured ranges
    owner = decode._visits_owner(x, int(module.BLOCK_N), roles.slots)
    assert owner is not None
    held = torch.arange(SMALL.max_len)[None, :] < lengths[:, None]
    assert torch.equal(torch.where(held, owner, -1), measured.owner)
    # read in the measured layout, the states the correctness launch wrote are the reference's
    roles.layouts = measured.layouts
    ref = apart.states_by_position(x.q, x.k, x.v, x.lengths, measured.owner, roles.slots)
    right, words, *_ = apart.split_report(roles, ref, x.lengths.cpu().tolist(), SMALL.heads, int(module.BLOCK_N))
    assert right is True and "Your split kernel alone is right" in words


@pytest.mark.slow
def test_slices_that_are_not_whole_blocks_are_measured_not_taken_from_the_visits(tmp_path):
    module = _module(tmp_path, "split_size_not_block_multiple")
    x, roles, measured = _probe(module)
    assert isinstance(measured, layout.Measured) and measured.owner is not None
    owner = decode._visits_owner(x, int(module.BLOCK_N), roles.slots)
    lengths = x.lengths.cpu().repeat_interleave(SMALL.heads)
    counts = decode._counts(owner, x.lengths, SMALL.heads, roles.slots) if owner is not None else None
    assert counts is None or not torch.equal(counts, measured.counts)  # the map's blocks are not the slices
    split_size = -(-SMALL.max_len // module.NUM_SPLITS)  # the launcher's, not rounded to a block
    first_row = measured.owner[0, : int(lengths[0])]
    assert (first_row == torch.arange(int(lengths[0])) // split_size).all()


@pytest.mark.slow
def test_a_slot_the_split_never_writes_is_seen(tmp_path):
    module = _module(tmp_path, "split_grid_one_short")
    _, roles, measured = _probe(module)
    assert isinstance(measured, layout.Measured) and bool(measured.unwritten[:, roles.slots - 1].all())
    assert not bool(measured.unwritten[:, : roles.slots - 1].any())
    assert f"never wrote the state of slot {roles.slots - 1} of any" in measured.words
    assert "hold 96 positions where its length is 100" in measured.words  # 3 slices of 32, not 4


@pytest.mark.slow
def test_the_timed_launch_is_compared_with_float64(tmp_path):
    """verify() runs on a GPU only (tutor.harness.check); called here directly on the CPU."""
    gen = torch.Generator().manual_seed(0)
    right = decode.timing_launches(DRILL, _module(tmp_path, "solution"), DEVICE.interpreter, WHERE, gen)
    assert right.verify is not None and right.verify() is None
    wrong = decode.timing_launches(DRILL, _module(tmp_path, "no_max_rescale"), DEVICE.interpreter, WHERE, gen)
    assert wrong.verify is not None
    said = wrong.verify()
    assert said is not None and "the timed launch" in said and "sequence 0, head 0 is off by up to" in said


@pytest.mark.slow
def test_a_scalar_state_is_read_in_the_layout_whose_counts_are_the_vector_states(tmp_path):
    """o_s stored slice-major, m_s and l_s row-major: l_s's counts read slice-major are counts
    too, so only the counts the vector state holds (its component 2) tell the two apart."""
    module = _module(tmp_path, "split_writes_o_slice_major")
    _, roles, measured = _probe(module)
    assert isinstance(measured, layout.Measured)
    assert measured.layouts[roles.vector].order == "srd"
    count_tensors = roles.tensors[-1:]  # l_s: the last state tensor the merge takes
    assert [measured.layouts[pos].order for pos in count_tensors] == ["rsf"]
