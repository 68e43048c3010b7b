"""A check names the bytes it loaded (result.content_id, git's blob id): progress counts
attempts by that id, so a save that lands while a check runs cannot give one
content's verdict the other content's id."""

from __future__ import annotations

from pathlib import Path

from tutor.harness.check import run_verdict
from tutor.harness.device import select_device
from tutor.harness.job import CheckJob
from tutor.harness.result import CheckResult
from tutor.pristine import blob_id


def _verdict(file: Path) -> CheckResult:
    result, _ = run_verdict(CheckJob(drill="01", file=str(file), timing=False, seed=0), select_device("cpu"))
    return result


def test_the_id_is_that_of_the_bytes_the_check_read(tmp_path):
    file = tmp_path / "01_causal_mask.py"
    file.write_bytes(b"def attention(:\n")  # read, then refused: a syntax error
    result = _verdict(file)
    assert result.error is not None and result.error.kind == "syntax"
    assert result.content_id == blob_id(b"def attention(:\n")
    assert CheckResult.from_dict(result.to_dict()).content_id == result.content_id  # crosses the process boundary


def test_a_file_that_cannot_be_read_has_no_id(tmp_path):
    result = _verdict(tmp_path / "01_causal_mask.py")
    assert result.error is not None and result.error.kind == "missing-file"
    assert result.content_id is None
