"""Reading a typed answer as a number, and writing numbers back for people.

An answer is a number in plain or scientific notation (``42``, ``4.2e1``,
``3,500,000,000``) or a simple arithmetic expression (``4*16384^2*96``,
``257/512``, ``2*(4096*64 + 4096^2)``: numbers, + - * / and ** or ^ for a
power, parentheses; nothing else), optionally followed by a scale or a unit
that fits the question's quantity:

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
returns both readings and the checker keeps the one that agrees with the
answer (else the closer one), saying which it used.  Explicit units (KB vs KiB)
are never reinterpreted.

Each reading carries its *precision*: half a unit of the last digit typed, in
the quantity's base unit (``2.43 GB`` is good to ±0.005 GB = ±5,000,000 bytes;
``2,434,793,472`` to ±0.5), so the checker can tell a rounded answer from a
slip that rounds to the same digits.  An expression is exact (±0).

Anything else raises :class:`AnswerError` with a message meant for the student.
The example answers in those messages (:data:`EXAMPLES`) are kept off every
question's answer (a test holds them to that).
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from fractions import Fraction
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
        (?: \d{1,3}(?:,\d{3})+ | \d+(?:_\d+)* )(?:\.\d*)?   # 42, 3,500,000,000, 1_000, 3.5
        | \.\d+                                          # .5
    )
    (?:[eE][+-]?\d+)?                                 # 4.2e1""",
    re.VERBOSE,
)
_OPERATORS = "+-−*/^"
_EXPRESSION = re.compile(r"[\d\s.,_eE()+\-−*/^]+")  # the longest run an expression can be written in
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:,\d{3})+(?![\d,])")  # 3,500,000,000 inside an expression
_LARGEST = 10**400  # past this an expression's value is no answer (and its arithmetic no longer cheap)


class AnswerError(ValueError):
    """The answer could not be read as a number of the right kind; the message says why."""


@dataclass(frozen=True)
class Reading:
    """One way to read an answer: its value in the question's base unit, how it
    was read (shown back to the student, e.g. ``3.5 GB = 3,500,000,000 bytes``),
    and its precision: half a unit of the last digit typed, in the base unit
    (``3.5 GB``: ±50,000,000 bytes; a whole number written in full: ±0.5; an
    expression: 0, exact)."""

    value: float
    how: str
    precision: float


@dataclass(frozen=True)
class _Typed:
    """The number part of an answer: its value, how to show it and its precision (before any unit)."""

    value: float
    text: str  # as typed ("3.5", "4*16384^2*96")
    shown: str  # as shown with no unit ("3.5", "4*16384^2*96 = 103,079,215,104")
    precision: float
    loose_sum: bool = False  # an expression that is a sum or difference outside parentheses ("1+2")


def parse_number(text: str, quantity: str) -> tuple[Reading, ...]:
    """Read ``text`` as a positive number (or zero) of ``quantity``: a number or an
    arithmetic expression, then an optional unit (the module's table).

    Returns one reading, or two when a bare k/M/G/T scale is ambiguous
    (decimal first, then binary), each with its value, how it was read and its
    precision.  Raises :class:`AnswerError` for anything that is not such a number.
    """
    if quantity not in QUANTITIES:
        raise ValueError(f"unknown quantity {quantity!r}; expected one of {QUANTITIES}")
    raw = text.strip()
    if not raw:
        raise AnswerError(f"Type an answer: a number such as {example_answers(quantity)}.")
    body = raw.lstrip("~≈").strip()
    if _is_expression(body):
        typed, suffix = _read_expression(body, raw, quantity)
    else:
        typed, suffix = _read_plain(body, raw, quantity)
    readings = _apply_suffix(typed, suffix, quantity, raw)
    for reading in readings:
        if not math.isfinite(reading.value):
            raise AnswerError(f"{raw!r} is too large to be an answer (it overflows a float).")
    return readings


def _is_expression(body: str) -> bool:
    """True when ``body`` is arithmetic (``2*3``, ``(4096)``, ``2^10 GB``), not one number and a unit."""
    unsigned = body[1:].lstrip() if body[:1] in "+-−" else body
    if unsigned[:1] == "(":
        return True
    match = _NUMBER.match(unsigned)
    if not match:
        return False
    rest = unsigned[match.end():].lstrip()
    return bool(rest) and rest[0] in _OPERATORS + "()"


def _read_plain(body: str, raw: str, quantity: str) -> tuple[_Typed, str]:
    sign = ""
    if body[:1] in "+-−":
        sign, body = body[0], body[1:].lstrip()
    match = _NUMBER.match(body)
    if not match:
        raise AnswerError(f"{raw!r} is not a number. Answer with a number such as {example_answers(quantity)}.")
    number_text = match.group(0)
    suffix = body[match.end():].strip()
    if suffix[:1] == "," or ("," in number_text and suffix[:1].isdigit()):
        raise AnswerError(f"{raw!r}: use a dot for decimals ({_DOT_EXAMPLE}); "
                          f"commas only group thousands ({_COMMA_EXAMPLE}).")
    if suffix[:1].isdigit() or suffix[:1] == ".":
        raise AnswerError(f"{raw!r} is not one number. Answer with a single number such as "
                          f"{example_answers(quantity)}.")
    value = float(number_text.replace(",", "").replace("_", ""))
    if not math.isfinite(value):
        raise AnswerError(f"{raw!r} is too large to be an answer (it overflows a float).")
    if sign in ("-", "−") and value != 0:
        raise AnswerError(f"{raw!r}: {_NAMES[quantity]} cannot be negative.")
    return _Typed(value, number_text, f"{value:,.15g}", _half_unit(number_text)), suffix


def _half_unit(number_text: str) -> float:
    """Half a unit of the last digit of a plain number: ``3.5`` -> 0.05, ``1.37e11`` -> 0.005e11, ``42`` -> 0.5."""
    mantissa, _, exponent = number_text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 0.5 * 10.0 ** (int(exponent or 0) - decimals)


def _read_expression(body: str, raw: str, quantity: str) -> tuple[_Typed, str]:
    """An arithmetic expression, evaluated exactly (ast: numbers, + - * / ** ^ and parentheses, nothing else)."""
    match = _EXPRESSION.match(body)
    assert match is not None  # _is_expression saw a number or a parenthesis first
    expression, suffix = match.group(0).strip(), body[match.end():].strip()
    source = _GROUPED.sub(lambda m: m.group(0).replace(",", ""), expression)
    if "," in source:
        raise AnswerError(f"{raw!r}: use a dot for decimals ({_DOT_EXAMPLE}); "
                          f"commas only group thousands ({_COMMA_EXAMPLE}).")
    source = source.replace("−", "-").replace("^", "**")
    unreadable = AnswerError(
        f"{raw!r} is not a number or an expression I can read. Use numbers, + - * / and ^ (a power) "
        f"and parentheses, such as {_EXPRESSION_EXAMPLE}, or a number such as {example_answers(quantity)}.")
    try:
        tree = ast.parse(source, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise unreadable from None
    try:
        value = float(_evaluate(tree.body))
    except ZeroDivisionError:
        raise AnswerError(f"{raw!r} divides by zero.") from None
    except OverflowError:
        raise AnswerError(f"{raw!r} is too large to be an answer (it overflows a float).") from None
    except (TypeError, ValueError, RecursionError):
        raise unreadable from None
    if value < 0:
        raise AnswerError(f"{raw!r}: {_NAMES[quantity]} cannot be negative.")
    written = grouped(value) if value.is_integer() else f"{value:,.15g}"
    top = tree.body  # a sum outside parentheses spans the whole text; "(1+2)" starts after its "("
    loose_sum = isinstance(top, ast.BinOp) and isinstance(top.op, (ast.Add, ast.Sub)) and top.col_offset == 0
    return _Typed(value, expression, f"{expression} = {written}", 0.0, loose_sum), suffix


_BINARY_OPERATORS = {ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow}


def _evaluate(node: ast.expr) -> Fraction:
    """The exact value of a parsed expression of numbers and + - * / ** (TypeError for anything else)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        if not math.isfinite(node.value):  # 1e999
            raise OverflowError("too large")
        value = Fraction(repr(node.value))  # 0.1 is 1/10, not the float nearest it
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _evaluate(node.operand)
        value = -value if isinstance(node.op, ast.USub) else value
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY_OPERATORS:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add):
            value = left + right
        elif isinstance(node.op, ast.Sub):
            value = left - right
        elif isinstance(node.op, ast.Mult):
            value = left * right
        elif isinstance(node.op, ast.Div):
            value = left / right
        else:
            value = _power(left, right)
    else:
        raise TypeError(f"not allowed in an answer: {ast.dump(node)}")
    if abs(value) > _LARGEST:
        raise OverflowError("too large")
    return value


def _power(base: Fraction, exponent: Fraction) -> Fraction:
    if base != 0:
        digits = float(exponent) * math.log10(abs(base))  # the power's size, before computing it
        if digits > math.log10(_LARGEST):
            raise OverflowError("too large")
        if digits < -math.log10(_LARGEST):
            return Fraction(0)  # far below any answer, and below a float's least value
    if exponent.denominator == 1:
        return base ** exponent.numerator
    if base < 0:
        raise ValueError("a fractional power of a negative number")
    return Fraction(float(base) ** float(exponent))


EXAMPLES: dict[str, tuple[str, ...]] = {
    "bytes": ("3.5 GB", "3.7 GiB", "3,500,000,000 bytes"),
    "tokens": ("7000", "7k"),
    "ratio": ("42", "42x"),
    "flops": ("2.5e11", "250 GFLOP"),
    "flops-per-byte": ("12.5", "12.5 FLOP/B"),
    "fraction": ("0.25", "25%"),
}
"""Example answers each quantity's messages offer; none is any question's answer (tests/test_quiz_examples.py)."""
SHORT_EXAMPLES = ("3.5 GB", "42x", "7k")
"""The one-line reminder of the forms an answer takes (the CLI's intro, the app's input)."""
_EXPRESSION_EXAMPLE = "2*(3+4)^2"
_DOT_EXAMPLE = "3.75"
_COMMA_EXAMPLE = "3,500,000,000"
EXAMPLE_TEXTS = (*SHORT_EXAMPLES, _EXPRESSION_EXAMPLE, _DOT_EXAMPLE, _COMMA_EXAMPLE)
"""Every example number a message shows besides :data:`EXAMPLES`."""


def example_answers(quantity: str) -> str:
    """The examples of one quantity in words: ``3.5 GB, 3.7 GiB or 3,500,000,000 bytes``."""
    examples = EXAMPLES[quantity]
    return ", ".join(examples[:-1]) + f" or {examples[-1]}"


def arithmetic_example() -> str:
    """An expression the parser reads, for the words that say arithmetic is fine."""
    return _EXPRESSION_EXAMPLE


_NAMES = {
    "bytes": "a number of bytes",
    "tokens": "a sequence length",
    "ratio": "a ratio of traffic",
    "flops": "a FLOP count",
    "flops-per-byte": "an arithmetic intensity",
    "fraction": "a fraction",
}


def _apply_suffix(typed: _Typed, suffix: str, quantity: str, raw: str) -> tuple[Reading, ...]:
    readings = _read_suffix(typed, suffix, quantity, raw)
    if typed.loose_sum and any(r.value != typed.value for r in readings):
        # "1+2 GB": 3 GB, or 1 byte + 2 GB?  A scale after a sum reads two ways
        raise AnswerError(f"{raw!r}: put the sum in parentheses before a unit or scale: "
                          f"({typed.text}) {suffix.strip()}.")
    return readings


def _read_suffix(typed: _Typed, suffix: str, quantity: str, raw: str) -> tuple[Reading, ...]:
    key = re.sub(r"\s+", "", suffix).lower()
    value, shown, half = typed.value, typed.shown, typed.precision
    if key == "":
        return (Reading(value, shown, half),)
    if quantity == "bytes":
        if key in _BYTE_UNITS:
            factor, unit = _BYTE_UNITS[key]
            how = (f"{shown} bytes" if factor == 1
                   else f"{typed.text} {suffix.strip()} = {grouped(value * factor)} bytes ({unit})")
            return (Reading(value * factor, how, half * factor),)
        if key in _BINARY:
            return _both_scales(typed, key, "bytes")
    elif quantity == "tokens":
        if key in ("token", "tokens"):
            return (Reading(value, shown, half),)
        if key in ("k", "m"):
            return _both_scales(typed, key, "tokens")
    elif quantity == "ratio":
        if key in _RATIO_UNITS:
            return (Reading(value, shown, half),)
    elif quantity == "flops":
        prefix = re.sub(r"flops?$", "", key)
        if prefix == "":
            return (Reading(value, f"{shown} FLOP", half),)
        if prefix in _DECIMAL:
            factor = _DECIMAL[prefix]
            how = f"{typed.text} {prefix.upper()}FLOP = {grouped(value * factor)} FLOP"
            return (Reading(value * factor, how, half * factor),)
    elif quantity == "flops-per-byte":
        if key in _INTENSITY_UNITS:
            return (Reading(value, f"{shown} FLOP/byte", half),)
    elif quantity == "fraction":
        if key == "%":
            return (Reading(value / 100, f"{typed.text}% = {value / 100:.15g}", half / 100),)
    raise AnswerError(_wrong_unit_message(raw, suffix, quantity))


def _both_scales(typed: _Typed, key: str, unit: str) -> tuple[Reading, ...]:
    letter = key.upper() if key != "k" else "k"
    value = typed.value
    decimal, binary = value * _DECIMAL[key], value * _BINARY[key]
    return (
        Reading(decimal, f"{typed.text}{letter} = {grouped(decimal)} {unit} ({letter} = {_DECIMAL[key]:,})",
                typed.precision * _DECIMAL[key]),
        Reading(binary, f"{typed.text}{letter} = {grouped(binary)} {unit} ({letter} = {_BINARY[key]:,})",
                typed.precision * _BINARY[key]),
    )


def _wrong_unit_message(raw: str, suffix: str, quantity: str) -> str:
    key = re.sub(r"\s+", "", suffix).lower()
    if quantity != "bytes" and (key in _BYTE_UNITS):
        return f"{raw!r}: this question asks for {_NAMES[quantity]}, not a number of bytes."
    if quantity == "ratio":
        return f"{raw!r}: a ratio has no unit; answer with a plain number or with x ({EXAMPLES['ratio'][-1]})."
    return f"{raw!r}: {suffix.strip()!r} is not a unit for {_NAMES[quantity]}. Try {example_answers(quantity)}."


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
