"""The one serialisation of the check's result and the progress file (tutor.codec):
every field survives the trip, derived figures are written and not read back,
and a key the dataclass does not know is refused where it always was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tutor import codec
from tutor.harness import roofline
from tutor.harness.result import CaseResult, CheckResult, Device, PhaseCost, ReadOut, VisitMap

RESULTS = Path(__file__).parent / "fixtures" / "results"


def full_result() -> CheckResult:
    """A recorded check with every later phase filled as well (a roofline with peaks, a read-out, costs)."""
    result = CheckResult.from_dict(json.loads((RESULTS / "01_failing.json").read_text()))
    assert result.visits is not None
    result.device = Device("cuda", "NVIDIA H200", interpreter=False, torch="2.11", triton="3.6")
    result.roofline = roofline.build([1, 2, 200, 64], {"causal": result.visits}, ms={"causal": 0.02},
                                     sdpa_ms={"causal": 0.01}, peaks={"tflops": 989.0, "gbps": 4800.0, "source": "t"})
    result.readout = {"causal": ReadOut(mode="causal", case="default", shape=[1, 2, 200, 64], block_m=64, block_n=64,
                                        launches=3, forbidden_where="diagonal-block", moves_with={"q": True},
                                        map_student=[[0.5]])}
    result.extra_visits = [VisitMap(16, 16, 32, 1, [[1, 0], [1, 1]], [[True, False], [True, True]], label="dQ")]
    result.costs = {"verdict": PhaseCost(1.0, 4, None), "performance": PhaseCost(2.0, 8, 1)}
    return result


def test_every_field_survives_json_and_the_derived_figures_are_written() -> None:
    result = full_result()
    data = json.loads(result.to_json())
    assert CheckResult.from_dict(data) == result
    assert data["device"]["label"] == "NVIDIA H200 (CUDA)" and data["outcome"] == result.outcome
    assert data["visit_map"]["counts"] == result.visits.counts and "visits" not in data
    launch = data["roofline"]["launches"][0]
    assert launch["bound"] in ("compute", "memory") and launch["intensity"] == pytest.approx(
        launch["flops"] / launch["bytes"])
    assert data["roofline"]["ridge"] == pytest.approx(989e12 / 4800e9)


def test_each_later_phase_carries_its_own_fields() -> None:
    result = full_result()
    verdict = CheckResult.from_dict({**result.to_dict(), "roofline": None, "readout": {}, "diagnosis": []})
    for phase in ("diagnosis", "performance"):
        verdict.apply_phase(phase, json.loads(json.dumps(result.phase_dict(phase))))
    assert verdict.roofline == result.roofline and verdict.readout == result.readout
    assert verdict.diagnosis == result.diagnosis and verdict.costs["performance"] == result.costs["performance"]
    assert set(result.phase_dict("performance")) == {
        "timing_shape", "timing_method", "full_ms", "causal_ms", "sdpa_full_ms", "sdpa_causal_ms",
        "sdpa_from_earlier_check", "performance", "roofline", "cost"}


def test_an_unknown_key_inside_is_refused_by_the_constructor_and_outside_ignored() -> None:
    case = {"name": "default", "causal": True, "shape": [1], "max_abs_err": None, "passed": True}
    assert codec.decode(CaseResult, case) == CaseResult("default", True, [1], None, True)
    with pytest.raises(TypeError, match="colour"):
        codec.decode(CaseResult, {**case, "colour": "red"})
    data = {**full_result().to_dict(), "added_by_a_later_version": 1}
    assert CheckResult.from_dict(data) == full_result()
