"""The softmax read-out of the decode and varlen drills (05, 07, 08; drill 06 has its own
words): where the output is wrong in no other named way, the weights read out through
one-hot values say the softmax's measured temperature, and what each row's weights add up
to, and say nothing of a slope where the weights are no softmax of the true scores; a
slope that a scale or base mistake gives is named wrong-temperature, any other stays
wrong-output."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers_harness import check_jobs, job

from tutor.authoring import student_kernels
from tutor.catalog import get_drill

SLOPE = "log(weight) follows the true scores with slope"

CASES = [  # (drill, entry, the code, what it says of the slope)
    ("05", "log2e_dropped", "wrong-temperature", "slope 0.693, not 1 (softmax's): that is ln(2)"),
    ("05", "split_no_sm_scale", "wrong-temperature", "not 1 (softmax's): that is 1/sm_scale"),
    ("05", "split_acc_not_rescaled", "wrong-output", "slope 1.000 (softmax's is 1)"),
    # another head's query: no softmax of these scores, no slope said
    ("05", "query_of_head_zero", "wrong-output", None),
    ("07", "scale_missing", "wrong-temperature", "not 1 (softmax's): that is 1/sm_scale"),
    ("08", "scale_twice", "wrong-temperature", "not 1 (softmax's): that is sm_scale"),
]


def entry_file(drill_id: str, name: str, folder: Path) -> Path:
    drill = get_drill(drill_id)
    entry = next(e for e in student_kernels.load(drill) if e.name == name)
    path = folder / f"{entry.stem}.py"
    path.write_text(entry.text(drill), encoding="utf-8")
    return path


@pytest.mark.slow
def test_the_softmax_readout_says_the_measured_slope_and_only_a_measured_one(tmp_path):
    files = [entry_file(d, name, tmp_path) for d, name, _, _ in CASES]
    results = check_jobs([job(f, d, seed=3) for f, (d, _, _, _) in zip(files, CASES, strict=True)])
    for (_, name, code, said), result in zip(CASES, results, strict=True):
        assert result.error is None and not result.passed, (name, result.error)
        words = {d.code: d.message for d in result.diagnosis}
        assert code in words and ({"wrong-output", "wrong-temperature"} - {code}).isdisjoint(words), (name, list(words))
        if said is None:
            assert SLOPE not in words[code], (name, words[code])
        else:
            assert said in words[code], (name, words[code])
