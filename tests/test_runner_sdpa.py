"""torch's SDPA baseline is timed by the first timed check of a drill and shown,
marked as such, with the later ones; the student's kernel is timed every time."""

from tutor.harness.result import CheckResult
from tutor.loop.runner import CheckRunner
from tutor.report import render


def _timed(full_ms: float, sdpa: tuple[float, float] | None) -> CheckResult:
    result = CheckResult(drill="01", file="x.py", passed=True, shape=[2, 8, 1000, 64], full_ms=full_ms,
                         causal_ms=full_ms / 2)
    if sdpa is not None:
        result.sdpa_full_ms, result.sdpa_causal_ms = sdpa
    return result


def test_the_first_timed_check_sets_the_baseline_and_later_ones_reuse_it() -> None:
    runner = CheckRunner(warm=False)
    first = _timed(1.0, (0.6, 0.35))
    runner._reuse_sdpa_timing("01", first, None)
    assert not first.sdpa_from_earlier_check
    later = _timed(0.9, None)  # a job sent with time_sdpa=False measures none
    runner._reuse_sdpa_timing("01", later, runner._sdpa.get("01"))
    assert (later.sdpa_full_ms, later.sdpa_causal_ms) == (0.6, 0.35)
    assert later.sdpa_from_earlier_check
    assert later.full_ms == 0.9  # the student's own timing is untouched
    assert "timed at this session's first check" in render(later)
    assert CheckResult.from_json(later.to_json()).sdpa_from_earlier_check


def test_an_untimed_check_neither_sets_nor_receives_the_baseline() -> None:
    runner = CheckRunner(warm=False)
    untimed = CheckResult(drill="01", file="x.py")
    runner._reuse_sdpa_timing("01", untimed, (0.6, 0.35))
    assert untimed.sdpa_full_ms is None
    assert "01" not in runner._sdpa
