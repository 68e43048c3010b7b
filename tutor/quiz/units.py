"""Reading a typed answer as a number, and writing numbers back for people.

An answer is a number in plain or scientific notation (``129``, ``1.29e2``,
``2,164,260,864``), optionally followed by a scale or a unit that fits the
question's quantity:

=================  ==========================================================
quantity           accepted suffixes
=================  ==========================================================
``bytes``          B, byte(s); KB MB GB TB (10³ⁿ); KiB MiB GiB TiB (2¹⁰ⁿ);
                   a bare k/M/G/T scale (read both ways, see below)
``tokens``         token(s); a k/M scale (read both ways)
``ratio``          x, ×, times
``flops``          FLOP(s) with an optional k/M/G/T/P prefix (always 10³ⁿ)
``flops-per-byte`` FLOP/B, FLOPs/byte, flops per byte
``fraction``       % (divided by 100)
=================  ==========================================================

A bare ``k`` on a byte count or a sequence length is genuinely ambiguous (a
"4k context" is 4096 tokens, "5k tokens" usually 5000), so :func:`parse_number`
returns both readings and the checker keeps the one closer to the answer,
saying which it used.  Explicit units (KB vs KiB) are never reinterpreted.

Anything else raises :class:`AnswerError` with a message meant for the student.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal, get_args

Quantity = Literal["bytes", "tokens", "ratio", "flops", "flops-per-byte", "fraction"]
"""What a numeric answer counts; each has its suffixes (the table above)."""
QUANTITIES: tuple[Quantity, ...] = get_args(Quantity)

_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12, "p": 10**15}
_BINARY = {"k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}


def _byte_units() -> dict[str, tuple[int, str]]:
    """Lower-cased byte unit -> (bytes, how to say it): kb -> (1000, "KB = 10^3 bytes")."""
    units = {"b": (1, "bytes"), "byte": (1, "bytes"), "bytes": (1, "bytes")}
    for power, prefix in enumerate("kmgt", start=1):
        letter = prefix.upper()
        units[f"{prefix}b"] = (1000**power, f"{letter}B = 10^{3 * power} bytes")
        units[f"{prefix}ib"] = (1024**power, f"{letter}iB = 2^{10 * power} bytes")
    return units


_BYTE_UNITS = _byte_units()
_RATIO_UNITS = {"x", "×", "times"}
_INTENSITY_UNITS = {"flop/b", "flops/b", "flop/byte", "flops/byte", "flopperbyte", "flopsperbyte"}

_NUMBER = re.compile(
    r"""(?P<number>
        (?: \d{1,3}(?:,\d{3})+ | \d+(?:_\d+)* )(?:\.\d*)?   # 129, 2,164,260,864, 1_000, 2.16
        | \.\d+                                          # .5
    )
    (?:[eE][+-]?\d+)?                                 # 1.29e2""",
    re.VERBOSE,
)


class AnswerError(ValueError):
    """The answer could not be read as a number of the right kind; the message says why."""


@dataclass(frozen=True)
class Reading:
    """One way to read an answer: its value in the question's base unit, and
    how it was read (shown back to the student, e.g. ``2.16 GB = 2,160,000,000 bytes``)."""

    value: float
    how: str


def parse_number(text: str, quantity: str) -> tuple[Reading, ...]:
    """Read ``text`` as a positive number (or zero) of ``quantity``.

    Returns one reading, or two when a bare k/M/G/T scale is ambiguous
    (decimal first, then binary).  Raises :class:`AnswerError` for anything
    that is not such a number.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; expected one of {QUANTITIES}")
    raw = text.strip()
    if not raw:
        raise AnswerError(f"Type an answer: a number such as {_EXAMPLES[quantity]}.")
    body = raw.lstrip("~≈").strip()
    sign = ""
    if body[:1] in "+-−":
        sign, body = body[0], body[1:].lstrip()
    match = _NUMBER.match(body)
    if not match:
        raise AnswerError(f"{raw!r} is not a number. Answer with a number such as {_EXAMPLES[quantity]}.")
    number_text = match.group(0)
    suffix = body[match.end():].strip()
    if suffix[:1] == "," or ("," in number_text and suffix[:1].isdigit()):
        raise AnswerError(f"{raw!r}: use a dot for decimals (2.16); commas only group thousands (2,164,260,864).")
    if suffix[:1].isdigit() or suffix[:1] == ".":
        raise AnswerError(f"{raw!r} is not one number. Answer with a single number such as {_EXAMPLES[quantity]}.")
    value = float(number_text.replace(",", "").replace("_", ""))
    if not math.isfinite(value):
        raise AnswerError(f"{raw!r} is too large to be an answer (it overflows a float).")
    if sign in ("-", "−") and value != 0:
        raise AnswerError(f"{raw!r}: {_NAMES[quantity]} cannot be negative.")
    readings = _apply_suffix(value, suffix, quantity, raw)
    for reading in readings:
        if not math.isfinite(reading.value):
            raise AnswerError(f"{raw!r} is too large to be an answer (it overflows a float).")
    return readings


_EXAMPLES = {
    "bytes": "2.16 GB, 2.0 GiB or 2,164,260,864 bytes",
    "tokens": "5000 or 4k",
    "ratio": "129 or 129x",
    "flops": "1.37e11 or 137 GFLOP",
    "flops-per-byte": "63.5 or 63.5 FLOP/B",
    "fraction": "0.53 or 53%",
}
_NAMES = {
    "bytes": "a number of bytes",
    "tokens": "a sequence length",
    "ratio": "a ratio of traffic",
    "flops": "a FLOP count",
    "flops-per-byte": "an arithmetic intensity",
    "fraction": "a fraction",
}


def _apply_suffix(value: float, suffix: str, quantity: str, raw: str) -> tuple[Reading, ...]:
    key = re.sub(r"\s+", "", suffix).lower()
    shown = f"{value:,.15g}"
    if key == "":
        return (Reading(value, shown),)
    if quantity == "bytes":
        if key in _BYTE_UNITS:
            factor, unit = _BYTE_UNITS[key]
            how = (f"{shown} bytes" if factor == 1
                   else f"{shown} {suffix.strip()} = {grouped(value * factor)} bytes ({unit})")
            return (Reading(value * factor, how),)
        if key in _BINARY:
            return _both_scales(value, key, "bytes")
    elif quantity == "tokens":
        if key in ("token", "tokens"):
            return (Reading(value, shown),)
        if key in ("k", "m"):
            return _both_scales(value, key, "tokens")
    elif quantity == "ratio":
        if key in _RATIO_UNITS:
            return (Reading(value, shown),)
    elif quantity == "flops":
        prefix = re.sub(r"flops?$", "", key)
        if prefix == "":
            return (Reading(value, f"{shown} FLOP"),)
        if prefix in _DECIMAL:
            factor = _DECIMAL[prefix]
            return (Reading(value * factor, f"{shown} {prefix.upper()}FLOP = {grouped(value * factor)} FLOP"),)
    elif quantity == "flops-per-byte":
        if key in _INTENSITY_UNITS:
            return (Reading(value, f"{shown} FLOP/byte"),)
    elif quantity == "fraction":
        if key == "%":
            return (Reading(value / 100, f"{shown}% = {value / 100:.15g}"),)
    raise AnswerError(_wrong_unit_message(raw, suffix, quantity))


def _both_scales(value: float, key: str, unit: str) -> tuple[Reading, ...]:
    letter = key.upper() if key != "k" else "k"
    decimal, binary = value * _DECIMAL[key], value * _BINARY[key]
    return (
        Reading(decimal, f"{value:,.15g}{letter} = {grouped(decimal)} {unit} ({letter} = {_DECIMAL[key]:,})"),
        Reading(binary, f"{value:,.15g}{letter} = {grouped(binary)} {unit} ({letter} = {_BINARY[key]:,})"),
    )


def _wrong_unit_message(raw: str, suffix: str, quantity: str) -> str:
    key = re.sub(r"\s+", "", suffix).lower()
    if quantity != "bytes" and (key in _BYTE_UNITS):
        return f"{raw!r}: this question asks for {_NAMES[quantity]}, not a number of bytes."
    if quantity == "ratio":
        return f"{raw!r}: a ratio has no unit; answer with a plain number or with x (129x)."
    return f"{raw!r}: {suffix.strip()!r} is not a unit for {_NAMES[quantity]}. Try {_EXAMPLES[quantity]}."


# --- writing numbers for people ------------------------------------------------------------

EXACT_UP_TO = 1e15  # past this, every digit is not worth a line: 1e99 is written 1e+99


def grouped(value: float) -> str:
    """A whole number with thousands separators (``2,164,260,864``), or, past
    :data:`EXACT_UP_TO`, in scientific notation, so no answer prints a 100-digit number."""
    return f"{value:,.0f}" if abs(value) < EXACT_UP_TO else f"{value:.6g}"


def format_bytes(value: float) -> str:
    """``2,164,260,864 bytes (2.16 GB, 2.02 GiB)``: exact count, then both unit families."""
    whole = float(value).is_integer() or abs(value) >= EXACT_UP_TO
    exact = f"{grouped(value)} bytes" if whole else f"{value:,.1f} bytes"
    if abs(value) < 1000:
        return exact
    return f"{exact} ({_scaled(value, 1000, _DECIMAL_BYTES)}, {_scaled(value, 1024, _BINARY_BYTES)})"


_DECIMAL_BYTES = ("kB", "MB", "GB", "TB", "PB")
_BINARY_BYTES = ("KiB", "MiB", "GiB", "TiB", "PiB")


def _scaled(value: float, base: int, units: tuple[str, ...]) -> str:
    scaled, index = float(value) / base, 0
    while abs(scaled) >= base and index < len(units) - 1:
        scaled /= base
        index += 1
    text = f"{scaled:.3g}" if abs(scaled) < 1000 else grouped(scaled)
    return f"{text} {units[index]}"


def format_count(value: float, unit: str = "") -> str:
    """An integer with thousands separators, or a number to 6 significant digits."""
    text = grouped(value) if float(value).is_integer() else f"{value:,.6g}"
    return f"{text} {unit}".strip()


def format_quantity(value: float, quantity: str) -> str:
    """A value of ``quantity`` written the way its question's explanation writes it."""
    if quantity == "bytes":
        return format_bytes(value)
    if quantity == "tokens":
        return format_count(value, "tokens")
    if quantity == "ratio":
        return f"{format_count(value)}x"
    if quantity == "flops":
        return f"{format_count(value)} FLOP ({value:.3g})"
    if quantity == "flops-per-byte":
        return format_count(value, "FLOP/byte")
    if quantity == "fraction":
        return f"{value:.6g} ({value * 100:.6g}%)"
    raise ValueError(f"unknown quantity {quantity!r}")
