"""Triton's interpreter, computing with bfloat16 values instead of their bit patterns.

numpy has no bfloat16, so Triton's interpreter keeps a bfloat16 tensor as its
uint16 bit patterns and converts them only where a kernel casts.  Its
``tl.dot`` converts 8-bit floats first but not bfloat16, and its elementwise
arithmetic converts nothing: with triton 3.9 a ``tl.dot`` of two bfloat16
tiles multiplied the bit patterns as integers (errors of 1e10 on standard
normal inputs), and ``a + a``, ``a * a``, ``tl.maximum`` of bfloat16 tensors
gave NaN or nonsense.  A correct kernel that feeds its MMA in bfloat16
(``tl.dot(p.to(tl.bfloat16), v.to(tl.bfloat16))``) then FAILED on the CPU
although a GPU computes it right.

:func:`install` makes those operations compute what a GPU does: a dot widens
bfloat16 operands to float32 (exact) and accumulates in the accumulator's
type; an elementwise operation with a bfloat16 operand computes in float32
and rounds the result back to bfloat16 to nearest even, as the GPU's
conversion does; a cast from float32 to bfloat16 rounds the same way (Triton's
interpreter truncated).  Loads, stores, ``tl.where`` and the cast to float32
already handle bfloat16 right and are left alone.  Not covered: reductions (``tl.sum``/``tl.max``) of
bfloat16 tensors still see bit patterns (``tests/test_interpreter_bf16.py``
says which operations are covered).

Only Triton's private names are touched (``InterpreterBuilder.create_dot``,
``binary_op``, ``unary_op``, ``cast_impl``, ``TensorHandle``, ``_convert_float``); where a
Triton version lacks one, :func:`install` leaves the interpreter as it is and
returns False.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch


def install() -> bool:
    """Patch the running interpreter (idempotent); False where it lacks the names."""
    from triton.runtime import interpreter

    builder = getattr(interpreter, "InterpreterBuilder", None)
    handle_type = getattr(interpreter, "TensorHandle", None)
    convert = getattr(interpreter, "_convert_float", None)
    names = ("create_dot", "binary_op", "unary_op", "cast_impl")
    if builder is None or handle_type is None or convert is None or not all(hasattr(builder, n) for n in names):
        return False
    if getattr(builder.create_dot, "_flashtutor_bf16", False):
        return True
    bf16, fp32 = interpreter.tl.bfloat16, interpreter.tl.float32

    def is_bf16(handle: Any) -> bool:
        return bool(handle.dtype.scalar == bf16)

    def widened(handle: Any) -> Any:
        """A bfloat16 handle's values as float32 (exact); any other handle as it is."""
        if not is_bf16(handle):
            return handle
        data = np.asarray(convert(handle.data, bf16, fp32, None)).view(np.float32)
        return handle_type(data.reshape(np.shape(handle.data)), fp32)

    def narrowed(handle: Any) -> Any:
        """A float32 handle rounded to bfloat16 (nearest even), stored as Triton's interpreter stores it."""
        values = torch.from_numpy(np.ascontiguousarray(handle.data, dtype=np.float32))
        bits = values.to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
        return handle_type(bits.reshape(np.shape(handle.data)), bf16)

    dot, binary, unary, cast = builder.create_dot, builder.binary_op, builder.unary_op, builder.cast_impl

    @functools.wraps(cast)
    def cast_impl(self: Any, src: Any, dst_type: Any) -> Any:
        if src.dtype.scalar == fp32 and dst_type.scalar == bf16:
            return narrowed(src)  # Triton's own conversion truncates; a GPU rounds to nearest even
        return cast(self, src, dst_type)

    @functools.wraps(dot)
    def create_dot(self: Any, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        if is_bf16(a) or is_bf16(b):
            a, b = widened(a), widened(b)
        return dot(self, a, b, *args, **kwargs)

    @functools.wraps(binary)
    def binary_op(self: Any, lhs: Any, rhs: Any, op: Any) -> Any:
        if not (is_bf16(lhs) or is_bf16(rhs)):
            return binary(self, lhs, rhs, op)
        out = binary(self, widened(lhs), widened(rhs), op)
        return narrowed(out) if out.dtype.scalar == fp32 else out  # a comparison stays boolean

    @functools.wraps(unary)
    def unary_op(self: Any, arg: Any, op: Any) -> Any:
        if not is_bf16(arg):
            return unary(self, arg, op)
        out = unary(self, widened(arg), op)
        return narrowed(out) if out.dtype.scalar == fp32 else out

    create_dot._flashtutor_bf16 = True  # type: ignore[attr-defined]
    builder.create_dot, builder.binary_op, builder.unary_op = create_dot, binary_op, unary_op
    builder.cast_impl = cast_impl
    return True
