"""The plain-text report of a check, in the drill spec's format.

    shape         : batch=2 heads=8 seq=1000 head_dim=64
    visited       : 2176/4096 K/V blocks in total (16 heads x 256 per head; ideal 2176 = 16 x 136, 0.531)
    causal work   : 2176/4096 K/V blocks of the full launch's, in total (full/causal = 1.88x,
                    counted from the visit maps)
    max abs err   : 9.8e-04   (tolerance 0.02)
    result        : PASSED

    timed at      : batch=4 heads=16 seq=4096 head_dim=64
    full   (ms)   : 0.412
    causal (ms)   : 0.236   (1.75x vs full, timed)
    ...

The verdict comes first (it is known as soon as correctness is); a failing
kernel's diagnosis follows as a second result for the same content (a passing
kernel's comes with the verdict), the performance phase as a third.
"""

from __future__ import annotations

import sys

from tutor.harness.result import CheckResult
from tutor.links import file_link

LABEL_WIDTH = 14


def _line(label: str, value: str) -> str:
    return f"{label:<{LABEL_WIDTH}}: {value}"


def shape_text(shape: list[int]) -> str:
    batch, heads, seq, head_dim = shape
    return f"batch={batch} heads={heads} seq={seq} head_dim={head_dim}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


VERDICT_WORDS = {
    "solved": "PASSED",
    "passed-with-finding": "PASSED",  # the finding is printed below it
    "failed": "FAILED",
    "not-run": "COULD NOT RUN",
}


def step_words(step: str) -> str:
    """What a running check is doing, for a spinner: "compiling…" while the kernel
    loads and compiles, else the launch it runs."""
    return "compiling…" if step.startswith("loading") else f"running {step}"


def verdict(result: CheckResult) -> str:
    return VERDICT_WORDS[result.outcome]


def error_excerpts(result: CheckResult) -> list[tuple[str, list[str]]]:
    """The short excerpts worth showing under a check that could not run, as
    (heading, lines): the compiler's (or the interpreter's) own words for a compile
    error, and the last output of the student's code where it explains the failure.
    Every front end shows these; only the layout differs."""
    error = result.error
    assert error is not None
    excerpts = []
    if error.kind == "compile" and error.detail:
        # a GPU's CompilationError quotes the source; the interpreter's is a traceback
        traceback = error.detail.lstrip().startswith("File ")
        excerpts.append(("where in your file:" if traceback else "compiler said:", error.detail.splitlines()[-8:]))
    if result.output.strip() and error.kind in ("crash", "timeout", "runtime", "import"):
        excerpts.append(("last output of your code:", result.output.strip().splitlines()[-10:]))
    return excerpts


def printable(text: str) -> str:
    """``text`` with its control characters escaped (``\\x00``, ``\\x1b``): a binary file's
    bytes quoted in a report must never reach the terminal raw."""
    return "".join(c if c.isprintable() or c == "\t" else c.encode("unicode_escape").decode("ascii") for c in text)


def error_lines(result: CheckResult, links: bool = False) -> list[str]:
    """A check that could not run: where, the line itself, and the message.
    ``links``: the place as a terminal hyperlink where stdout's terminal renders them."""
    error = result.error
    assert error is not None
    lines = [f"error         : {error.kind}"]
    if error.location():
        where = error.location()
        if links and error.file:
            where = file_link(error.file, error.line, text=where, stream=sys.stdout)
        lines.append(_line("where", where))
    if error.source_line:
        lines.append(_line("line", printable(error.source_line.strip())))
    if error.during:
        lines.append(_line("while", printable(error.during)))
    lines.append(_line("message", printable(error.message)))
    for heading, excerpt in error_excerpts(result):
        lines += ["", heading, *("    " + x for x in excerpt)]
    return lines


def visited_line(result: CheckResult) -> str | None:
    """The headline count of the visit map, total over batch × heads, with the per-head figures."""
    v = result.visits
    if v is None or not v.total_blocks:
        return None
    per_head = len(v.counts) * len(v.counts[0])
    ideal_per_head = sum(map(sum, v.ideal))
    return (f"{v.visited_blocks}/{v.total_blocks} K/V blocks in total "
            f"({v.heads} heads x {per_head} per head; ideal {v.ideal_blocks} = {v.heads} x {ideal_per_head}, "
            f"{result.ideal_fraction:.3f})")


def work_line(result: CheckResult) -> str | None:
    """Counted work of the causal launch against the full one, from the two visit maps."""
    ratio = result.work_ratio
    if ratio is None or result.visits is None:
        return None
    return (f"{result.visits.visited_blocks}/{result.full_visited_blocks} K/V blocks of the full launch's, in total "
            f"(full/causal = {ratio:.2f}x, counted from the visit maps)")


def max_err_text(result: CheckResult) -> str:
    """The max-abs-err line's value: the largest error, or, where some case's output held
    NaN/Inf or unwritten elements, which cases and how many, then the largest error of the
    others (a diagnosis that explains another case need not say the NaN: blind round 22, a
    NaN in this line and no word of it below)."""
    if result.max_abs_err is not None:
        return f"{result.max_abs_err:.1e}"
    bad = [c for c in result.cases if c.max_abs_err is None]
    if not bad:
        return "NaN/Inf or unwritten output"
    modes = any(c.causal for c in result.cases)  # name the launch's mode only where the drill has two
    parts = []
    for c in bad:
        what = " and ".join(filter(None, (f"{c.nonfinite} NaN/Inf values" if c.nonfinite else "",
                                          f"{c.unwritten} unwritten" if c.unwritten else "")))
        parts.append(f"{c.name}{(', causal' if c.causal else ', full') if modes else ''}: {what or 'not comparable'}")
    finite = [c.max_abs_err for c in result.cases if c.max_abs_err is not None]
    where = "every case" if not finite else f"{len(bad)} of {len(result.cases)} cases"
    shown = "; ".join(parts[:3]) + (f"; {len(parts) - 3} more case{'s' if len(parts) > 4 else ''}"
                                     if len(parts) > 3 else "")
    others = f"; {max(finite):.1e} on the others" if finite else ""
    return f"NaN/Inf or unwritten output in {where} ({shown}){others}"


def verdict_lines(result: CheckResult, title: str = "", links: bool = False, diagnosis: bool = True) -> list[str]:
    """The first phase: device, shape, visit map counts, error, verdict; with
    ``diagnosis``, what :func:`diagnosis_lines` says below it."""
    lines: list[str] = []
    if title:
        lines.append(_line("drill", title))
    if result.device is not None:
        lines.append(_line("device", result.device.label))
    if result.error is not None:
        lines += error_lines(result, links)
        lines.append(_line("result", verdict(result)))
        return lines
    lines.append(_line("shape", shape_text(result.shape)))
    visited = visited_line(result)
    if visited is not None:
        lines.append(_line("visited", visited))
        if result.visits is not None and result.visits.label:  # what the map is of, where it is not plain
            # the map itself is drawn in the app and given in --json: this line says what it is of
            lines.append(_line("visit map", f"{result.visits.label} (drawn in `flashtutor launch`; in --json as"
                                            " visit_map)"))
        for extra in result.extra_visits:  # a problem's other loops (drill 04's dK/dV loop): counted too
            # "in the dK/dV loop: ...", "in the window block mask" (a label that opens with its own article)
            of = extra.label if extra.label.startswith("the ") else f"the {extra.label}"
            lines.append(_line("also visited", f"{extra.visited_blocks}/{extra.total_blocks} blocks in total (ideal"
                                               f" {extra.ideal_blocks}) in {of}"))
    work = work_line(result)
    if work is not None:
        lines.append(_line("causal work", work))
    lines.append(_line("max abs err", f"{max_err_text(result)}   (tolerance {result.tolerance:g})"))
    lines.append(_line("result", verdict(result)))
    return lines + (diagnosis_lines(result) if diagnosis else [])


def diagnosis_lines(result: CheckResult) -> list[str]:
    """The second phase: what the diagnosis found, or where it stands."""
    phase = result.diagnosis_phase
    if result.error is not None and phase.status != "pending":
        return []  # a check that could not run: its error says it all
    if phase.status == "pending":
        return ["", _line("diagnosis", "reading out your kernel… (the verdict above is in)")]
    lines: list[str] = []
    if phase.status in ("skipped", "failed", "cancelled"):
        lines += ["", _line("diagnosis", f"{phase.status}: {phase.reason}")]
    for d in result.diagnosis:
        lines += ["", ("finding: " if d.severity == "finding" else "") + d.message]
    return lines


def performance_lines(result: CheckResult) -> list[str]:
    """The second phase: timed launches, torch's SDPA, the roofline (or why there are none)."""
    perf = result.performance
    if perf.status == "pending":
        return [_line("performance", "timing…")]
    if perf.status in ("failed", "cancelled"):
        return [_line("performance", f"{perf.status}: {perf.reason}")]
    if not result.timed_ms:
        return []  # not timed (--no-timing)
    interpreter = result.device is not None and result.device.interpreter
    lines: list[str] = []
    if result.timing_shape and result.timing_shape != result.shape:
        lines.append(_line("timed at", shape_text(result.timing_shape)))
    if interpreter:
        # the interpreter's wall clock does not follow the work at these sizes: no ratio
        wall = ", ".join(f"{mode} {_ms(ms)} ms" for mode, ms in result.timed_ms.items())
        counted = "; the counted work above is" if result.total_blocks else ""
        lines.append(_line("wall clock", f"{wall}   (interpreter: not a speed{counted})"))
    else:
        if result.full_ms is not None:
            lines.append(_line("full   (ms)", _ms(result.full_ms)))
        if result.causal_ms is not None:
            versus = f"   ({result.speedup:.2f}x vs full, timed)" if result.speedup is not None else ""
            lines.append(_line("causal (ms)", f"{_ms(result.causal_ms)}{versus}"))
    if result.sdpa_timed_ms:
        sdpa = ", ".join(f"{mode} {_ms(ms)}" for mode, ms in result.sdpa_timed_ms.items())
        if result.sdpa_from_earlier_check:
            sdpa += "   (timed at this session's first check)"
        lines.append(_line("torch sdpa", sdpa))
    if result.roofline is not None:
        from tutor.roofline import lines as roofline_lines

        lines += [f"{'roofline':<{LABEL_WIDTH}}: {result.roofline.counted_on}"
                  + ("" if not interpreter else "; counts only on the interpreter, no rates")]
        lines += roofline_lines(result.roofline)
    return lines


def render(result: CheckResult, title: str = "") -> str:
    """The whole report: the verdict, then the performance phase."""
    lines = verdict_lines(result, title)
    performance = performance_lines(result) if result.error is None else []
    if performance:
        lines += ["", *performance]
    return "\n".join(lines)
