"""The interpreter's minimum triton version is read correctly from version strings."""

import pytest

from tutor.harness.device import interpreter_supports


@pytest.mark.parametrize(
    ("version", "runs_interpreter"),
    [("3.6.0", False), ("3.6.0+git1234", False), ("3.7.0", True), ("3.9.0", True), ("3.10.1", True),
     ("4.0.0rc1", True)],
)
def test_minimum_triton_for_the_interpreter(version: str, runs_interpreter: bool) -> None:
    assert interpreter_supports(version) is runs_interpreter
