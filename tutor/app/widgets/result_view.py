"""The parts of a check result: the verdict, the numbers, the error, the diagnosis.

Each ``*_text`` function turns a :class:`CheckResult` into styled text and is
what the widgets below display; keeping them pure keeps the widgets trivial
and the wording testable without running an app.
"""

from __future__ import annotations

from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual.widgets import Static

from tutor.harness.result import CheckResult
from tutor.links import file_uri
from tutor.report import error_excerpts, max_err_text, printable, shape_text

LABEL = 13  # width of the label column

# The verdict, with a mark that reads without colour.
PASSED_MARK, FAILED_MARK, NOT_RUN_MARK = "✔", "✘", "⚠"


# the CSS class of each outcome (CheckResult.outcome decides; this only names it)
VERDICT_CLASSES = {"solved": "solved", "passed-with-finding": "passed", "failed": "failed", "not-run": "error"}


def verdict_kind(result: CheckResult) -> str:
    """"solved", "passed" (correct, but a finding is open), "failed" or "error"."""
    return VERDICT_CLASSES[result.outcome]


def verdict_text(result: CheckResult) -> Text:
    kind = verdict_kind(result)
    if kind == "error":
        assert result.error is not None  # "not-run" is the outcome of an error
        return Text(f"{NOT_RUN_MARK}  COULD NOT RUN · {result.error.kind}")
    if kind == "failed":
        return Text(f"{FAILED_MARK}  FAILED")
    if kind == "passed":
        findings = sum(d.severity == "finding" for d in result.diagnosis)
        return Text(f"{PASSED_MARK}  PASSED · {findings} finding{'s' if findings > 1 else ''} open")
    return Text(f"{PASSED_MARK}  PASSED")


def _row(text: Text, label: str, value: str | Text, note: str = "") -> None:
    text.append(f"{label:<{LABEL}}", style="bold")
    text.append(value)
    if note:
        text.append(f"  {note}", style="dim")
    text.append("\n")


def _ms(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3f} ms" if value < 10 else f"{value:.1f} ms")


def metrics_text(result: CheckResult) -> Text:
    """Error against tolerance, timings and speed-up, torch's SDPA, visited fraction."""
    text = Text()
    if result.max_abs_err is None:
        err = Text(max_err_text(result), style="bold red")
    else:
        ok = result.max_abs_err <= result.tolerance
        err = Text(f"{result.max_abs_err:.1e}", style="bold green" if ok else "bold red")
        err.append(f"  {'≤' if ok else '>'} tolerance {result.tolerance:g}", style="")
    _row(text, "max abs err", err)
    interpreter = result.device is not None and result.device.interpreter
    if result.work_ratio is not None and result.visits is not None:
        # counted, not timed: the causal launch's K/V blocks against the full launch's
        _row(text, "causal work", f"{result.visits.visited_blocks}/{result.full_visited_blocks} blocks",
             f"full/causal {result.work_ratio:.2f}x, counted")
    if result.performance.status == "pending":
        _row(text, "timing", "…", "the timed launches follow")
    elif result.performance.status in ("failed", "cancelled"):
        _row(text, "timing", result.performance.status, result.performance.reason)
    if interpreter and result.timed_ms:
        wall = " · ".join(f"{mode} {_ms(ms)}" for mode, ms in result.timed_ms.items())
        _row(text, "wall clock", Text(wall, style="dim"), "interpreter: not a speed")
    else:
        if result.full_ms is not None:
            _row(text, "full", _ms(result.full_ms))
        if result.causal_ms is not None:
            speedup = result.speedup
            _row(text, "causal", _ms(result.causal_ms), "" if speedup is None else f"{speedup:.2f}x vs full, timed")
    if result.sdpa_full_ms is not None or result.sdpa_causal_ms is not None:
        parts = []
        if result.sdpa_full_ms is not None:
            parts.append(f"full {_ms(result.sdpa_full_ms)}")
        if result.sdpa_causal_ms is not None:
            parts.append(f"causal {_ms(result.sdpa_causal_ms)}")
        note = ""
        if result.causal_ms and result.sdpa_causal_ms:
            note = f"yours takes {result.causal_ms / result.sdpa_causal_ms:.2f}x its time"
        if result.sdpa_from_earlier_check:  # the same SDPA, timed once a session (tutor.loop.runner)
            note = "; ".join(filter(None, [note, "sdpa timed at this session's first check"]))
        _row(text, "torch sdpa", " · ".join(parts), note)
    elif interpreter and result.timed_ms:
        _row(text, "torch sdpa", "-", "compared on a GPU only")
    if result.visits is not None and result.visited_fraction is not None:
        v = result.visits
        value = f"{result.visited_fraction:.3f} ({v.visited_blocks}/{v.total_blocks} in total)"
        _row(text, "visited", value, f"ideal {result.ideal_fraction:.3f}, {v.heads} heads")
    if result.shape:
        _row(text, "shape", shape_text(result.shape).replace("head_dim", "d"))
    if result.timing_method and result.timed_ms and not interpreter:
        text.append(result.timing_method, style="dim")
    text.rstrip()
    return text


def display_path(path: str | None, workspace: Path | None) -> str:
    """``path`` relative to the workspace when it lies inside it."""
    if not path:
        return ""
    if workspace is not None:
        try:
            return str(Path(path).resolve().relative_to(workspace.resolve()))
        except ValueError:
            pass
    return path


def error_text(result: CheckResult, workspace: Path | None = None) -> Text:
    """Where, the line itself, the message — and a short excerpt only where it helps."""
    error = result.error
    assert error is not None, "error_text needs a result that could not run"
    text = Text()
    where = display_path(error.file, workspace)
    if where:
        # a terminal hyperlink to the file (Textual writes OSC 8 where the terminal takes it)
        link = Style(bold=True, link=file_uri(Path(error.file))) if error.file else Style(bold=True)
        text.append(where + (f":{error.line}" if error.line else ""), style=link)
        text.append("\n")
    if error.source_line is not None and error.line:
        text.append(f"{error.line:>5} │ ", style="dim")
        text.append(printable(error.source_line.rstrip()) + "\n", style="bold")  # a binary file's bytes, escaped
    if error.during:
        text.append(f"while {printable(error.during)}\n", style="dim")
    text.append(printable(error.message))
    for heading, excerpt in error_excerpts(result):
        text.append(f"\n\n{heading}\n", style="dim")
        text.append("\n".join(excerpt))
    return text


def diagnosis_text(result: CheckResult) -> Text:
    """The named mistakes and findings, or where the diagnosis phase stands."""
    text = Text()
    phase = result.diagnosis_phase
    if phase.status == "pending":
        text.append("why it failed: ", style="bold")
        text.append("reading out your kernel…", style="dim")
        return text
    if phase.status in ("skipped", "failed") and result.error is None:
        text.append(f"diagnosis {phase.status}: ", style="bold")
        text.append(phase.reason, style="dim")
        if result.diagnosis:
            text.append("\n\n")
    for k, d in enumerate(result.diagnosis):
        if k:
            text.append("\n\n")
        label = {"error": "why it failed", "finding": "finding", "info": "note"}.get(d.severity, d.severity)
        text.append(f"{label}: ", style="bold")
        text.append(d.message)
    return text


def has_diagnosis_text(result: CheckResult) -> bool:
    """Whether :func:`diagnosis_text` has anything to show."""
    phase = result.diagnosis_phase.status
    return bool(result.diagnosis) or phase == "pending" or (phase in ("skipped", "failed") and result.error is None)


class Verdict(Static):
    """The verdict, large: a bordered block whose CSS class follows the outcome."""

    def show(self, result: CheckResult | None) -> None:
        self.remove_class("solved", "passed", "failed", "error", "none")
        if result is None:
            self.add_class("none")
            self.update("not checked yet")
            return
        self.add_class(verdict_kind(result))
        self.update(verdict_text(result))
