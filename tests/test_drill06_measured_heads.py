"""Drill 06's diagnosis measurements added for issue 22, on real interpreter kernels
(student-like kernels from solutions/06_sliding_window_gqa.mistakes.toml): the K/V head
read by the keys and by the values apart, the window read out with q = 0 (which keys a
row sees whatever the softmax temperature), and the causal side by how many keys."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers_harness import entry_module

from tutor.catalog import get_drill
from tutor.harness.device import select_device
from tutor.harness.problems import sliding_window_gqa as swa

DRILL = get_drill("06")


@pytest.fixture(autouse=True, scope="module")
def device():
    return select_device("auto")  # Triton's interpreter on a machine without a GPU


def _load(tmp_path: Path, name: str):
    return entry_module("06", name, tmp_path)


def test_keys_and_values_are_traced_to_their_heads_apart(tmp_path):
    """K from the group's head, V from the query head's own index modulo H_KV: changing
    K alone moves query heads 0, 1 with K/V head 0; changing V alone moves 0, 2."""
    module = _load(tmp_path, "v_from_query_head")
    case = swa.Case("t", 1, 4, 2, 40, 64, 16)
    gen = torch.Generator().manual_seed(4)
    q, k, v = swa.random_inputs(case, "cpu", gen)
    checked = swa.Checked(case, None, swa.run(module, q, k, v, case.window), swa.window_reference(q, k, v, case.window))
    keys = swa.kv_heads_read(module, checked, gen, "K")
    values = swa.kv_heads_read(module, checked, gen, "V")
    assert keys == [{h // 2} for h in range(4)]
    assert values == [{h % 2} for h in range(4)]
    assert swa.kv_heads_read(module, checked, gen) == [k_ | v_ for k_, v_ in zip(keys, values, strict=True)]
    words = swa.split_heads(keys, values, case)
    assert "keys of query heads 0..3 from K/V heads 0, 0, 1, 1; values from 0, 1, 0, 1" in words
    assert swa.split_heads(keys, keys, case) == ""  # where the maps agree, nothing more is said


@pytest.mark.slow
def test_a_temperature_far_from_softmax_does_not_read_as_missed_keys(tmp_path):
    """sm_scale = sqrt(d): on the scaled read-out's scores many window keys underflow
    to weight 0 (they would read as missed); with q = 0 every window key has weight
    1/count, so the window read is exactly right and no window finding is made."""
    module = _load(tmp_path, "scale_inverted")
    case = swa.Case("t", 1, 2, 1, 100, 64, 48)
    weights, visits = swa.weight_readout(module, case, "cpu", torch.Generator().manual_seed(5))
    support, _ = swa.weight_readout(module, case, "cpu", torch.Generator().manual_seed(6), zero_q=True)
    mask = swa.window_mask(case.seq, case.window)
    assert bool(((support[0] > 0) == mask).all())
    count = mask.sum(dim=-1, keepdim=True).double()
    assert torch.allclose(support[0][mask], (1 / count).expand_as(mask)[mask], rtol=2e-3)
    assert bool(((weights[0] == 0) & mask).any())  # the underflow the q = 0 read-out is there for
    assert "window-keys-missed" in {f.code for f in swa.read_window(weights, visits, case, 64, 64)}
    assert swa.read_window(weights, visits, case, 64, 64, support) == []


@pytest.mark.slow
def test_the_causal_side_is_measured_by_how_many_keys(tmp_path):
    module = _load(tmp_path, "causal_edge_one_late")
    case = swa.Case("t", 1, 1, 1, 100, 64, 16)
    weights, visits = swa.weight_readout(module, case, "cpu", torch.Generator().manual_seed(5))
    found = [f for f in swa.read_window(weights, visits, case, 64, 64) if f.code == "future-keys-seen"]
    assert len(found) == 1 and "looks ahead is 1 key." in found[0].detail


@pytest.mark.parametrize("name,right", [("group_as_constexpr", True), ("scale_missing", False)])
def test_the_timed_launch_is_verified_against_the_reference(tmp_path, name, right):
    """verify() (run on a GPU after the timing) re-runs the timed launch and compares its
    first and last query head with float64: here on the interpreter's timing case."""
    module = _load(tmp_path, name)
    timed = swa.timing_launches(DRILL, module, True, "cpu", torch.Generator().manual_seed(7))
    assert timed.verify is not None
    said = timed.verify()
    if right:
        assert said is None
    else:  # no 1/sqrt(d): every head is wrong
        assert said is not None and "batch 0, query head 0 (K/V head 0) is off by up to" in said


def test_a_head_dim_128_case_runs_on_a_gpu_only():
    assert any(c.head_dim == 128 for c in swa.GPU_CASES)
    assert all(c.head_dim <= 64 for c in swa.CPU_CASES)  # the interpreter is slow
    # and one CPU case at another head_dim than 64: a kernel that writes 64 for HEAD_DIM fails there
    assert {c.head_dim for c in swa.CPU_CASES} == {32, 64}
    assert [c.head_dim for c in swa.cases_for(False)] == [c.head_dim for c in swa.GPU_CASES]


def test_a_query_read_from_another_head_is_named_by_its_head(tmp_path):
    """q loaded at the K/V head's base (blind round 9, w71): query head h reads head h // G's
    query, with its own K/V; the weights show no wrong key, so the head swap is the finding."""
    module = _load(tmp_path, "q_base_from_kv_base")
    case = swa.Case("t", 1, 4, 2, 40, 64, 16)
    q, k, v = swa.random_inputs(case, "cpu", torch.Generator().manual_seed(7))
    launch = swa.run(module, q, k, v, case.window)
    checked = swa.Checked(case, None, launch, swa.window_reference(q, k, v, case.window))
    words = swa._other_head_words(checked, DRILL.tolerance)
    assert "another head's query and its own K/V (head 1: head 0's; head 2: head 1's; head 3: head 1's)" in words
