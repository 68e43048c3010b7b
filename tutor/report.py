"""The plain-text report of a check, in the drill spec's format.

    shape         : batch=2 heads=8 seq=1000 head_dim=64
    full   (ms)   : 0.412
    causal (ms)   : 0.236   (1.75x vs full)
    visited       : 2176/4096 K/V blocks (0.531; ideal 0.531)
    max abs err   : 9.8e-04   (tolerance 0.02)
    result        : PASSED
"""

from __future__ import annotations

from tutor.harness.result import CheckResult

LABEL_WIDTH = 14


def _line(label: str, value: str) -> str:
    return f"{label:<{LABEL_WIDTH}}: {value}"


def shape_text(shape: list[int]) -> str:
    batch, heads, seq, head_dim = shape
    return f"batch={batch} heads={heads} seq={seq} head_dim={head_dim}"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def verdict(result: CheckResult) -> str:
    if result.error is not None:
        return "COULD NOT RUN"
    return "PASSED" if result.passed else "FAILED"


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


def error_lines(result: CheckResult) -> list[str]:
    """A check that could not run: where, the line itself, and the message."""
    error = result.error
    assert error is not None
    lines = [f"error         : {error.kind}"]
    if error.location():
        lines.append(_line("where", error.location()))
    if error.source_line:
        lines.append(_line("line", error.source_line.strip()))
    lines.append(_line("message", error.message))
    for heading, excerpt in error_excerpts(result):
        lines += ["", heading, *("    " + x for x in excerpt)]
    return lines


def render(result: CheckResult, title: str = "") -> str:
    lines: list[str] = []
    if title:
        lines.append(_line("drill", title))
    if result.device is not None:
        lines.append(_line("device", result.device.label))
    if result.error is not None:
        lines += error_lines(result)
        lines.append(_line("result", verdict(result)))
        return "\n".join(lines)
    lines.append(_line("shape", shape_text(result.shape)))
    if result.timing_shape and result.timing_shape != result.shape:
        lines.append(_line("timed at", shape_text(result.timing_shape)))
    if result.full_ms is not None:
        lines.append(_line("full   (ms)", _ms(result.full_ms)))
    if result.causal_ms is not None:
        lines.append(_line("causal (ms)", f"{_ms(result.causal_ms)}   ({result.speedup:.2f}x vs full)"))
    if result.sdpa_full_ms is not None:
        sdpa = f"full {_ms(result.sdpa_full_ms)}"
        if result.sdpa_causal_ms is not None:
            sdpa += f", causal {_ms(result.sdpa_causal_ms)}"
        if result.sdpa_from_earlier_check:
            sdpa += "   (timed at this session's first check)"
        lines.append(_line("torch sdpa", sdpa))
    if result.visits is not None:
        v = result.visits
        lines.append(
            _line(
                "visited",
                f"{v.visited_blocks}/{v.total_blocks} K/V blocks "
                f"({result.visited_fraction:.3f}; ideal {result.ideal_fraction:.3f})",
            )
        )
    err = "NaN/Inf or unwritten output" if result.max_abs_err is None else f"{result.max_abs_err:.1e}"
    lines.append(_line("max abs err", f"{err}   (tolerance {result.tolerance:g})"))
    lines.append(_line("result", verdict(result)))
    if result.device is not None and result.device.interpreter and result.full_ms is not None:
        lines.append("(CPU interpreter: the milliseconds are relative only; compare ratios, not devices)")
    for d in result.diagnosis:
        lines += ["", ("finding: " if d.severity == "finding" else "") + d.message]
    return "\n".join(lines)
