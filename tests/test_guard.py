"""Guard bands (tutor/harness/guard.py, launch.py): every tensor the kernel
touches is a view inside a buffer whose margins hold a sentinel.  A store past
the end changes a margin, a load past the end reads NaN, and the check says
which tensor, which side and at which shape.  A crash that still happens is
explained by re-running the kernel at a block-multiple length (tutor.loop.runner).

The margin mechanics are checked against writes and reads the test makes
itself; the student-like kernels come from solutions/NN_slug.mistakes.toml and
run through the real harness (in this process, or in real workers for the
crash and the CLI)."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest
import torch
from helpers_harness import run_cli, shipped_solution

from tutor.authoring.student_kernels import load
from tutor.catalog import get_drill
from tutor.harness import guard, launch
from tutor.harness import guarded as shared
from tutor.harness.check import run_check
from tutor.harness.device import select_device
from tutor.harness.job import CheckJob
from tutor.harness.result import CheckResult
from tutor.loop.runner import CheckRunner

SHAPE = (1, 2, 40, 16)
NUMEL = 1 * 2 * 40 * 16


def test_a_banded_tensor_is_a_contiguous_view_with_the_strides_of_a_plain_one():
    source = torch.randn(SHAPE).half()
    made = guard.input_band("K", source, guard.margin_elements(SHAPE, 64))
    assert made.view.is_contiguous() and made.view.stride() == source.stride()
    assert made.view.contiguous().data_ptr() == made.view.data_ptr()  # a launcher's .contiguous() keeps it
    assert torch.equal(made.view, source)
    # the margin keeps the view as aligned as the buffer (the CPU allocator gives 64 bytes, CUDA's 256+)
    assert made.margin >= 128 * SHAPE[-1] and (made.view.data_ptr() - made.buffer.data_ptr()) % 128 == 0
    assert made.buffer.numel() == NUMEL + 2 * made.margin
    assert torch.isnan(made.buffer[: made.margin]).all() and torch.isnan(made.buffer[-made.margin:]).all()
    assert made.changed() == {}


def test_margins_catch_writes_on_each_side_and_count_them():
    out = guard.band("output", SHAPE, torch.float16, "cpu", 256, launch.POISON_BITS, inside_bits=launch.POISON_BITS)
    visits = guard.band("visit map", (2, 1, 3), torch.int32, "cpu", 64, guard.VISIT_SENTINEL, inside_bits=0)
    # writes made through the storage, as a kernel's pointer arithmetic would: 5 past the end, 3 before the start
    flat = out.view.view(-1)
    beyond = torch.as_strided(flat, (5,), (1,), flat.storage_offset() + NUMEL)
    beyond.fill_(1.0)
    torch.as_strided(flat, (3,), (1,), flat.storage_offset() - 3).fill_(2.0)
    flat[:] = 0.5  # writes inside change no margin
    assert out.changed() == {"after": 5, "before": 3}
    assert (visits.view == 0).all() and visits.changed() == {}
    vflat = visits.view.view(-1)
    torch.as_strided(vflat, (1,), (1,), vflat.storage_offset() + vflat.numel()).fill_(1)
    assert visits.changed() == {"after": 1}


def test_a_read_past_the_end_reads_nan_and_the_probe_names_tensor_and_side():
    """A plain-torch "kernel" that adds K's first element after its end to every
    output of the last row: only NaN after K explains the NaN it produces."""
    def attention(q, k, v, out=None, visits=None):
        flat = k.reshape(-1)
        past = torch.as_strided(flat, (1,), (1,), flat.storage_offset() + flat.numel())
        out.copy_(v)
        out[..., -1, :] += past
        return out

    module = SimpleNamespace(attention=attention, BLOCK_M=16, BLOCK_N=16)
    q, k, v = launch.random_inputs(SHAPE, "cpu", torch.Generator().manual_seed(0))
    run = launch.run_launcher(module, (q, k, v), None, record_visits=False)
    nan_rows = torch.isnan(run.out.float()).any(dim=-1)
    assert nan_rows[..., -1].all() and not nan_rows[..., :-1].any()  # independent: the last row of each head
    baseline = guard.computed_nans(run.out, launch.POISON_BITS)
    assert baseline == 2 * 16

    def again(fills):
        return launch.run_launcher(module, (q, k, v), None, record_visits=False, fills=fills).out

    assert guard.probe_reads(again, launch.POISON_BITS, baseline) == [("K", "after", 32)]
    finite = again({"Q": "zero", "K": "zero", "V": "zero"})
    assert torch.equal(finite[..., :-1, :], v[..., :-1, :])  # a finite margin (zeros) changes nothing else


def _check(drill: str, path) -> CheckResult:
    return run_check(CheckJob(drill=drill, file=str(path), timing=False, seed=3), select_device("cpu"))


# entry -> (tensor, side, access) the guard findings must hold
GUARD_ENTRIES = {
    ("01", "v_load_unmasked"): ("V", "after", "read"),
    ("02", "v_load_unmasked"): ("V", "after", "read"),
    ("02", "k_load_and_scores_unmasked"): ("K", "after", "read"),
    ("02", "store_unmasked"): ("output", "after", "write"),
    ("02", "loop_one_block_too_far"): ("visit map", "after", "write"),
    ("01", "loop_one_block_too_far"): ("visit map", "after", "write"),
}


def _entries():
    found = {(m.drill, m.name): m for d in ("01", "02") for m in load(get_drill(d))}
    return [found[key] for key in GUARD_ENTRIES]


@pytest.mark.slow
@pytest.mark.parametrize("mistake", _entries(), ids=lambda m: m.stem)
def test_each_guard_mistake_entry_names_tensor_side_and_shape(mistake, tmp_path):
    path = tmp_path / f"{mistake.stem}.py"
    path.write_text(mistake.text(get_drill(mistake.drill)), encoding="utf-8")
    result = _check(mistake.drill, path)
    assert result.error is None, result.error
    assert result.passed == mistake.passes
    assert [d.code for d in result.diagnosis if d.severity in ("error", "finding")] == list(mistake.codes)
    tensor, side, access = GUARD_ENTRIES[(mistake.drill, mistake.name)]
    seen = {(g.tensor, g.side, g.access) for g in result.guard_findings}
    assert seen == {(tensor, side, access)}, result.guard_findings
    first = result.guard_findings[0]
    assert first.shape == result.shape and first.elements > 0
    if access == "read":
        # NaN from the margin, gone at a block-multiple length; the message quotes both
        assert first.clean_shape is not None and first.clean_shape[2] % 64 == 0
        message = result.diagnosis[0].message
        assert f"{tensor} is read past its end when seq = {result.shape[2]}" in message
        assert f"at seq = {first.clean_shape[2]}" in message
        # the NaN is explained: no guess about -inf - (-inf)
        assert "nan-in-output" not in result.codes


@pytest.mark.slow
def test_every_solution_reaches_no_guard_band():
    for drill in ("01", "02"):
        result = _check(drill, shipped_solution(drill))
        assert result.passed and result.guard_findings == [], result.guard_findings


@pytest.mark.slow
def test_check_json_reports_the_guard_findings(tmp_path):
    mistake = {m.name: m for m in load(get_drill("02"))}["v_load_unmasked"]
    path = tmp_path / "02_v_load_unmasked.py"
    path.write_text(mistake.text(get_drill("02")), encoding="utf-8")
    run = run_cli("check", path, "--drill", "02", "--json", "--no-timing", cwd=tmp_path)
    data = json.loads(run.stdout)
    assert data["passed"] is False and "read-past-end" in [d["code"] for d in data["diagnosis"]]
    assert {(g["tensor"], g["side"], g["access"]) for g in data["guard_findings"]} == {("V", "after", "read")}
    assert CheckResult.from_dict(data).guard_findings[0].clean_shape == data["guard_findings"][0]["clean_shape"]


CRASHES_WHEN_RAGGED = '''
import ctypes


def _crash_on_a_ragged_length(seq):
    if seq % BLOCK_N:  # as an unmasked load far past the end would
        ctypes.string_at(0)


_solved = attention


def attention(q, k, v, out=None, visits=None):
    _crash_on_a_ragged_length(q.shape[2])
    return _solved(q, k, v, out=out, visits=visits)
'''


@pytest.mark.slow
def test_a_crash_only_on_ragged_lengths_is_explained_by_a_block_multiple_rerun(tmp_path):
    path = tmp_path / "02_crashes_when_ragged.py"
    path.write_text(shipped_solution("02").read_text(encoding="utf-8") + textwrap.dedent(CRASHES_WHEN_RAGGED))
    with CheckRunner(device="auto", warm=False) as runner:
        result = runner.check("02", path, timing=False)
    assert result.error is not None and result.error.kind == "crash"
    assert "SIGSEGV" in result.error.message
    assert "The same kernel at seq = 256" in result.error.message
    assert "reads or writes past the end of the sequence" in result.error.message


@pytest.mark.slow
def test_a_crash_at_every_length_is_not_blamed_on_the_ragged_tail(tmp_path):
    path = tmp_path / "02_always_crashes.py"
    text = textwrap.dedent(CRASHES_WHEN_RAGGED).replace("if seq % BLOCK_N:", "if True:")
    path.write_text(shipped_solution("02").read_text(encoding="utf-8") + text)
    with CheckRunner(device="auto", warm=False) as runner:
        result = runner.check("02", path, timing=False)
    assert result.error is not None and result.error.kind == "crash"
    assert "The same kernel" not in result.error.message


def test_whole_unwritten_heads_are_named_and_other_patterns_are_left_to_the_count():
    out = torch.zeros(2, 3, 8, 4, dtype=torch.float16)
    poison = torch.tensor(shared.POISON_BITS, dtype=torch.int16).view(torch.float16)
    heads = out.clone()
    heads[1, 2] = poison  # one whole (batch, head), every row of the rest written
    said = shared.unwritten_words(heads)
    assert "(batch 1, head 2) is unwritten" in said and "other 5 (batch, head) pairs" in said
    rows = out.clone()
    rows[:, :, -3:] = poison  # the last rows of every head: the grid or the store's row mask
    tail = shared.unwritten_words(rows)
    assert "exactly rows 5..7, the last 3, of every (batch, head)" in tail and "the store's row mask" in tail
    rows[1, 1, 4] = poison  # one head a row further: no longer the same tail everywhere
    assert shared.unwritten_words(rows) == ""
    mixed = heads.clone()
    mixed[0, 0, 0] = poison  # a head partly unwritten beside the whole one: no head-offset claim
    assert shared.unwritten_words(mixed) == ""
