"""On the interpreter, a load or store outside every tensor a launch was given is an error
at the kernel's line (interpreter_bounds), not a crash of the worker or silent garbage; an
access inside a tensor's storage (a guard band's margin too) is no error."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_harness import check_one, solution_with

from tutor.harness import interpreter_bounds as bounds


def test_spans_are_the_storages_of_the_tensor_arguments():
    buffer = torch.zeros(100, dtype=torch.float16)
    view = buffer[10:20]  # a view inside a larger storage: the whole storage is its span

    def kernel(X, Y, n, BLOCK):
        pass

    spans = bounds.spans_of(kernel, (view, (buffer,), 3), {"BLOCK": 4, "num_warps": 4})
    assert spans is not None
    assert [(s.name, s.first, s.end, s.element_size) for s in spans] == [
        ("X", buffer.data_ptr(), buffer.data_ptr() + 200, 2), ("Y[0]", buffer.data_ptr(), buffer.data_ptr() + 200, 2)]


def test_an_access_is_checked_against_the_running_launch_only_where_masked_in():
    buffer = torch.zeros(16, dtype=torch.float32)
    start = buffer.data_ptr()
    bounds._launch.spans.append([bounds.Span("X", start, start + 64, 4)])
    try:
        inside = np.array([start, start + 60], dtype=np.uint64)
        bounds.check("load", inside, None, 4)  # the last element: inside
        past = np.array([start + 60, start + 64, start + 68], dtype=np.uint64)
        bounds.check("store", past, np.array([True, False, False]), 4)  # masked off: no access
        with pytest.raises(bounds.OutOfBounds, match=r"writes 2 elements .* 1 element past the end of X's storage"):
            bounds.check("store", past, None, 4)
        with pytest.raises(bounds.OutOfBounds, match=r"reads 1 element .* 2 elements before the start of X"):
            bounds.check("load", np.array([start - 8], dtype=np.uint64), None, 4)
    finally:
        bounds._launch.spans.pop()
    bounds.check("load", np.array([0], dtype=np.uint64), None, 4)  # outside a launch: nothing is checked


@pytest.mark.slow
def test_a_store_past_every_tensor_is_an_error_at_its_line_not_a_dead_worker(tmp_path):
    """Drill 07's slice states stored without their mask (found by a blind attempt): the
    padding rows of the last head group write past the state tensors.  The worker used to
    die with SIGABRT; now the check names the store and its line."""
    path = solution_with("07", "    tl.store(MidM + state, m_i, mask=g_ok)\n", "    tl.store(MidM + state, m_i)\n",
                         tmp_path / "07_states_unmasked.py")
    result = check_one(path, "07")
    assert result.error is not None and result.error.kind == "runtime", result.error
    assert "outside every tensor the kernel was given" in result.error.message
    assert "MidM's storage" in result.error.message
    assert result.error.source_line == "    tl.store(MidM + state, m_i)"


def test_an_integer_division_by_zero_is_noted_once_per_launch_and_said_with_an_out_of_bounds_access():
    bounds._launch.zero_division.append("")
    try:
        assert bounds._zero_division_words() == ""
        bounds.divided(np.array([4, 4]))  # no zero divisor: nothing noted
        assert bounds._zero_division_words() == ""
        bounds.divided(np.array([4, 0]))
        first = bounds._launch.zero_division[-1]
        assert first.endswith(": `bounds.divided(np.array([4, 0]))`"), first  # the line that divided
        bounds.divided(np.int32(0))  # only the first is kept
        assert bounds._launch.zero_division[-1] == first
        assert f"this launch divided an integer by 0 ({first})" in bounds._zero_division_words()
    finally:
        bounds._launch.zero_division.pop()
    bounds.divided(np.array([0]))  # outside a launch: nothing is noted (and nothing fails)


@pytest.mark.slow
def test_heads_passed_in_the_wrong_order_name_the_division_by_zero_that_led_out_of_bounds(tmp_path):
    """Drill 06's launcher passing H_KV for H and H for H_KV (blind round 19, 06/w40): the group
    size H // H_KV is 0, the K/V head h // 0 is 0 on the interpreter, and the load runs past K."""
    path = solution_with("06", "        head_dim**-0.5, seq, window, heads, heads_kv,\n",
                         "        head_dim**-0.5, seq, window, heads_kv, heads,\n", tmp_path / "06_heads_swapped.py")
    result = check_one(path, "06")
    assert result.error is not None and result.error.kind == "runtime", result.error
    assert "outside every tensor the kernel was given" in result.error.message
    assert "this launch divided an integer by 0 (program (0, 0, 0), line 49: `off_hkv = off_h // (H // H_KV)`)" \
        in result.error.message, result.error.message
