"""The poison and the inputs: the output starts as a NaN pattern no kernel
computes, with a guard after it; inputs are fresh random fp16 every run unless
a seed is given.  (Kernels that leave an element unwritten, write past the end
or put an Inf in the output are in tests/test_harness_diagnosis.py.)"""

from __future__ import annotations

import pytest
import torch
from helpers_harness import check_jobs, job, shipped_drill

from tutor.harness import launch


def test_the_poisoned_output_is_nan_everywhere_and_counted_as_unwritten():
    out, guard = launch.poisoned_output((1, 2, 5, 8), "cpu")
    assert out.dtype == torch.float16 and out.shape == (1, 2, 5, 8)
    assert torch.isnan(out).all()
    assert guard.numel() == launch.GUARD_ROWS * 8 and (guard == launch.POISON_BITS).all()
    run = launch.Launch(q=out, k=out, v=out, out=out, guard=guard, visits=None)
    assert run.unwritten == out.numel() and not run.wrote_out_of_bounds
    out[0, 1, 4, 7] = 0.5
    guard[0] = 0
    assert run.unwritten == out.numel() - 1 and run.wrote_out_of_bounds


def test_a_nan_a_kernel_computes_is_not_the_poison():
    zero, inf = torch.zeros(1), torch.full((1,), float("inf"))
    computed = torch.cat([zero / zero, inf - inf, inf * zero, torch.full((1,), float("nan"))]).half()
    assert torch.isnan(computed).all()
    assert not (computed.view(torch.int16) == launch.POISON_BITS).any()


def test_inputs_are_standard_normal_fp16_and_never_zeros():
    generator = torch.Generator().manual_seed(1)
    inputs = launch.random_inputs((1, 2, 200, 64), "cpu", generator)
    for tensor in inputs:
        assert tensor.dtype == torch.float16 and (tensor != 0).float().mean() > 0.99
        assert 0.9 < float(tensor.float().std()) < 1.1
    assert not torch.equal(inputs[0], inputs[1])


@pytest.fixture(scope="module")
def repeated_checks():
    """The shipped drill 02 (finite, wrong) checked twice unseeded and twice with one seed."""
    drill = shipped_drill("02")
    results = check_jobs([job(drill), job(drill), job(drill, seed=1234), job(drill, seed=1234)])
    return results[:2], results[2:]


@pytest.mark.slow
def test_every_unseeded_check_draws_new_inputs(repeated_checks):
    first, second = repeated_checks[0]
    assert first.max_abs_err is not None and second.max_abs_err is not None
    assert first.max_abs_err != second.max_abs_err
    assert [c.max_abs_err for c in first.cases] != [c.max_abs_err for c in second.cases]


@pytest.mark.slow
def test_a_seed_fixes_the_inputs(repeated_checks):
    first, second = repeated_checks[1]
    assert [c.max_abs_err for c in first.cases] == [c.max_abs_err for c in second.cases]
    assert first.codes == second.codes == ["never-rescaled"]
