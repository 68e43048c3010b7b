"""Drill 04: a case that fails with visit maps passed is launched again without them
(a compiled GPU check: the two are two compilations, and on H100/H200 a correct
32-row dK/dV loop measured wrong only with the map store compiled in).  Here, in the
interpreter, a kernel whose ``RECORD_VISITS`` branch itself spoils dK stands in for
that compiler: ``launch_case`` is asked to recheck as a GPU check would."""

from __future__ import annotations

from pathlib import Path

import torch

from tutor.harness.device import select_device

DEVICE = select_device("auto")  # TRITON_INTERPRET set before triton's import, as a worker does
WHERE = "cpu" if DEVICE.interpreter else "cuda"

from tutor.catalog import get_drill, solution_path  # noqa: E402
from tutor.harness.loader import load_student_module  # noqa: E402
from tutor.harness.problems import attention_backward as bwd  # noqa: E402

DRILL = get_drill("04")
SHAPE = (1, 1, 40, 16)
MAP_STORE = "            tl.store(Visits + (off_bh * n_n + start_n // BLOCK_N) * n_m + start_m // BLOCK_M, 1)\n"


def _module(tmp_path: Path, text: str, name: str):
    file = tmp_path / f"{name}_{DRILL.file}"
    file.write_text(text)
    return load_student_module(file, file.read_bytes())


def _launch(module, recheck: bool) -> bwd.BackwardLaunch:
    q, k, v, do = bwd.random_case(SHAPE, WHERE, torch.Generator().manual_seed(3))
    return bwd.launch_case("default", False, module, q, k, v, do, DRILL.tolerance, int(module.BLOCK_M),
                           int(module.BLOCK_N), recheck_plain=recheck)


def test_a_case_wrong_only_with_maps_is_judged_without_them(tmp_path):
    solution = solution_path(DRILL).read_text()
    assert solution.count(MAP_STORE) == 1
    spoiled = _module(tmp_path, solution.replace(MAP_STORE, MAP_STORE + "            dk = dk * 1.5\n"), "maps")
    as_checked = _launch(spoiled, recheck=False)
    assert not as_checked.case.passed and not as_checked.with_maps_err
    rechecked = _launch(spoiled, recheck=True)
    assert rechecked.case.passed and not rechecked.failed_without_maps
    assert rechecked.with_maps_err["dk"] is not None and rechecked.with_maps_err["dk"] > DRILL.tolerance
    assert rechecked.per_grad_err["dk"] is not None and rechecked.per_grad_err["dk"] <= DRILL.tolerance
    assert int(rechecked.dkdv_visits.sum()) > 0  # the map shown is the launch with maps' own
    # and so are its guard bands (a store past a map's end is read from the launch that wrote the map)
    assert rechecked.guarded is not None
    assert rechecked.guarded.band("dK/dV visit map").view.data_ptr() == rechecked.dkdv_visits.data_ptr()
    words = bwd._with_maps_words([rechecked], DRILL.tolerance)
    assert "the default case (shape 1x1x40x16, full): with maps dK off by up to" in words
    assert "dQ" not in words and "dV" not in words  # only the gradient the maps changed
    assert "visit-maps-change-result" in DRILL.diagnoses


def test_a_kernel_wrong_without_maps_too_fails_and_stops_the_rechecks(tmp_path):
    solution = solution_path(DRILL).read_text()
    scaled = "    dk = dk * sm_scale\n"
    assert solution.count(scaled) == 1
    wrong = _module(tmp_path, solution.replace(scaled, "    dk = dk * sm_scale * 1.5\n"), "wrong")
    launch = _launch(wrong, recheck=True)
    assert not launch.case.passed and launch.failed_without_maps and not launch.with_maps_err
    assert bwd._with_maps_words([launch], DRILL.tolerance) == ""
