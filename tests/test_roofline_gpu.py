"""On a GPU (skipped without one): the solutions' achieved rates sit within the
device's measured ceilings, and the roofline carries rates only there."""

from __future__ import annotations

import pytest

from tutor.catalog import get_drill, solution_path
from tutor.loop.runner import CheckRunner

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")


@pytest.mark.parametrize("drill_id", ["01", "02", "08"])  # 08: counted by its problem (timing_work)
def test_the_solutions_rates_are_within_the_measured_ceilings(drill_id):
    with CheckRunner(device="gpu", warm=False) as runner:
        result = runner.check(drill_id, solution_path(get_drill(drill_id)), seed=0)
    assert result.outcome == "solved" and result.performance.status == "done", result.performance.reason
    roof = result.roofline
    assert roof is not None and roof.peaks is not None, "no peaks for this GPU: neither measured nor in the table"
    for launch in roof.launches:
        assert launch.tflops is not None and launch.gbps is not None
        # FLOPs are counted exactly; no kernel beats the measured matmul rate by more than noise
        assert 0 < launch.tflops <= 1.1 * roof.peaks["tflops"], (launch, roof.peaks)
        assert launch.bound in ("compute", "memory")
        print(f"{drill_id} {launch.mode}: {launch.tflops:.0f} TFLOP/s, {launch.gbps:.0f} GB/s of tile loads "
              f"(HBM peak {roof.peaks['gbps']:.0f}; above it, L2 served repeated K/V loads), "
              f"{launch.bound}-bound")
